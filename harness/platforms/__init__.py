"""Platform clients: how the harness talks to a memory platform (see ``base``)."""

from harness.platforms.base import CallResult, Observer, PlatformClient, PlatformSession
from harness.platforms.mcp_data_platform import McpDataPlatform

__all__ = ["CallResult", "McpDataPlatform", "Observer", "PlatformClient", "PlatformSession"]
