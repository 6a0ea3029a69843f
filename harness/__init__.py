"""Runs protocols against platforms and hosts the CLI."""
