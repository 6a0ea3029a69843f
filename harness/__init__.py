"""Runs suites against platforms: the driver, the suites, units, episodes, agents, the model
layer, platform adapters and their startup, the run record, the work queue and peer-run import.
"""
