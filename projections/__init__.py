"""Projections: everything computed from a run's events, as pure folds (docs/metrics.md).

Each suite's read side lives in its own folder under ``suites`` (``lifecycle``,
``provenance``: fold and scorecard, the one decision function, report, audit, items),
found by the suite name a run records (``suites.lookup``); what their cards share is in
``card``. Beside them: statistics, compare and the gate, pre-registration, the audit's
shape, the runs table and trace hashes. Runs are read through ``source`` (the verified
door). ``lifecycle``, ``decisions``, ``report``, ``provenance`` and
``provenance_decisions`` are the old names, re-exporting their suite modules for importers
not moved yet.
"""
