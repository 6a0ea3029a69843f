"""Platform adapters (``base``) and their startup (``provision``): embedded, URL, stdio."""

from benchledger.harness.platforms.base import CallResult, Observer, PlatformClient, PlatformSession
from benchledger.harness.platforms.mcp_data_platform import McpDataPlatform

__all__ = ["CallResult", "McpDataPlatform", "Observer", "PlatformClient", "PlatformSession"]
