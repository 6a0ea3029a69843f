"""The bad-input corpus: each case a command that must fail in one line (``cases.yaml``).

``make_bad.py`` writes the files the cases name.
"""
