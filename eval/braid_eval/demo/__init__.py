"""``make demo``: two emulated WANs in braid's kernel, end to end, with a
readable report (``run``), its failover pane (``failover``, host kernel) and
its privacy pane (``observer``). ``python3 -m braid_eval.demo`` runs it."""
