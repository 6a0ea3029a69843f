"""Replay: re-derive a recorded run, re-execute it from its log, check bundles in CI.

``replay.levels.replay`` is the entry point (verify, then ``rederive`` or ``full``);
``replay.check`` checks a folder of bundles; ``replay.pytest_plugin`` does the same as
pytest tests. Trace hashes live in ``projections.trace`` (the live runner computes them
too, and the harness must not import replay).

Kept free of imports: pytest loads ``replay.pytest_plugin`` (and so this package) in
every session of a project that installs benchledger.
"""
