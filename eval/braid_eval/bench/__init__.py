"""Benchmarks: braid's schedulers side by side against ``default``, as ratios
(``sched``: goodput and latency; ``pageload``: page loads through braid-proxy)."""
