"""Benchmarks behind ``bench`` and ``selftest``: ledger and platform throughput as ratios
against a raw baseline measured in the same run, the run benchmark, resource attacks on the
platform, and the reliability selftest.
"""
