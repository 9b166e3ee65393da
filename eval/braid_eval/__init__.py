"""braid's evaluation: what measures the product.

``measure`` runs transfers and page loads on the testbed and records what
each WAN carried; ``bench`` compares schedulers side by side; ``experiments``
are E1-E3 with quick and full modes; ``demo`` is ``make demo``'s report;
``analysis`` turns captures and result files into figures and RESULTS.md.
"""
