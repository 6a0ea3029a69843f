"""benchledger's tests, with their shared helpers, loopback fakes (``fakes``) and data."""
