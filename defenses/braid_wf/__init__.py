"""braid's website-fingerprinting stack, in one place: the trace format
(``trace``), corpora (``synth``: synthetic; ``corpus``: page loads on the
testbed), the attacks (``attacks``: k-NN, CUMUL, k-FP; ``df``: Deep
Fingerprinting), their evaluation (``evaluate``, ``compare``), the defences
simulated on traces (``defences``) and the CLI (``python3 -m braid_wf``,
``braid-wf``)."""
