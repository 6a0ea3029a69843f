"""Client-side log silencing: the harness's MCP and HTTP clients log every request at INFO."""

from __future__ import annotations

import logging

# The in-process embedded platform's uvicorn shares this process, so its loggers are here too.
_CHATTY = (
    "mcp",
    "httpx2",
    "httpx",
    "httpcore",
    "httpcore2",
    "uvicorn",
    "uvicorn.error",
    "uvicorn.access",
    "sse_starlette",
)


def quiet_logs() -> None:
    """Raise the MCP SDK's, the HTTP stack's and uvicorn's loggers to WARNING."""
    for name in _CHATTY:
        logging.getLogger(name).setLevel(logging.WARNING)
