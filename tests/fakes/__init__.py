"""Loopback fakes of model provider APIs: real HTTP servers with a scripted brain and faults."""
