"""Client-side log silencing: the harness's MCP and HTTP clients log every request at INFO."""

from __future__ import annotations

import logging
import warnings

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
    # The MCP client logs each failed request as an error (with a traceback) and then hands
    # the failure to the caller, where it becomes an infra_error event: say it once, there.
    logging.getLogger("mcp.client").setLevel(logging.CRITICAL)
    # Likewise the embedded platform's MCP server (it shares this process): its failures reach
    # the harness as HTTP errors, and a stopped run's client leaving mid-request is none.
    logging.getLogger("mcp.server").setLevel(logging.CRITICAL)
    # The embedded platform's server errors reach the harness as HTTP 500 answers (recorded
    # as infra errors); stopping it under open session streams is no error at all. A filter,
    # because uvicorn resets its loggers' levels each time a server is configured.
    # A run stopped mid-episode (Ctrl-C, a full disk) leaves the MCP client's queued sends
    # unawaited; Python would say so at exit, after the one line that matters.
    warnings.filterwarnings("ignore", message="coroutine .* was never awaited",
                            category=RuntimeWarning)  # fmt: skip
    server_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _OnlyCritical) for f in server_log.filters):
        server_log.addFilter(_OnlyCritical())


class _OnlyCritical(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.CRITICAL
