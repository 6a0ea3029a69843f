"""Performance benchmarks: each prints ratios against a raw baseline measured in the same run."""
