"""Projections: everything computed from a run's events, as pure folds (docs/metrics.md).

Each of the three suites' read side lives in its own folder under ``suites``
(``lifecycle``, ``provenance``, ``tasks``: fold and scorecard, the one decision function,
report, audit, items), found by the suite name a run records (``suites.lookup``) in the
one suite registry, which another package's suite joins through an entry point; what
their cards share is in ``card``. Beside them: statistics, pre-registration, the audit's
shape, the runs table, trace hashes, what a run used (``usage``: durations, model-call
latencies, tokens) and what it cost at a dated price table (``prices``, shown by
``usage_view``), and a run in Inspect AI's log format (``inspect_log``). Runs are read
through ``source`` (the verified door).
"""
