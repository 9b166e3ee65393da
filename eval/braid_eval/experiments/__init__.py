"""The experiments against the papers' claims: E1 aggregation
(``aggregation``, ``timevarying``), E2 latency against the model's optimum
(``latency``, ``latency_model``), E3 failover timelines (``failover``,
``failover_metrics``). Each has a quick mode for the suite and a full mode."""
