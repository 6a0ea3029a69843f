"""Runs protocols against platforms: the runner, episodes, agents and platform clients."""
