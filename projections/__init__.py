"""Projections: everything computed from a run's events, as pure folds (docs/metrics.md).

The one decision functions (``decisions``, ``provenance_decisions``), the lifecycle and
provenance metrics, statistics, reports, compare and the gate, pre-registration, audit,
the runs table and trace hashes. Runs are read through ``source`` (the verified door).
"""
