"""From captures and result files to figures: data-sequence reassembly
(``dss``), what one WAN's observer can rebuild (``split_analysis``), reports
and plots (``report``), provenance, false-failure thresholds of the
statistical tests, and RESULTS.md (``summary``, ``selftest_record``)."""
