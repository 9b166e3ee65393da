"""braid's website-fingerprinting defences, simulated on traces.

``wftrace`` (the WF trace format), ``hywf_sim`` (HyWF's split, p-drift),
``adaptive_padding``, ``front``, ``hywf_ap``, ``defended`` (what a defence
returns) and ``defense_catalog`` (every defence by name, one parameter set).
"""
