"""refplatform: the reference memory platform, speaking txn2/mcp-data-platform's contract.

See docs/refplatform.md. ``python -m benchledger.refplatform serve`` runs it; the harness starts it
in-process with ``refplatform.server.InMemoryPlatform`` (``RunningPlatform`` on a port).
"""
