"""Website-fingerprinting defences, simulated on traces.

``hywf_sim`` (HyWF's split, p-drift), ``adaptive_padding``, ``front``,
``hywf_ap``, ``defended`` (what a defence returns) and ``catalog`` (every
defence by name, one parameter set).
"""
