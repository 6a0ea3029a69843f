"""The harness's local logs: client-side log silencing (the MCP and HTTP clients log every
request at INFO) and the failure log, where a harness failure's traceback goes."""

from __future__ import annotations

import logging
import os
import sys
import time
import traceback
import warnings
from collections.abc import Iterable

from benchledger.harness.scrub import scrubber

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


class FailureLog:
    """Where the tracebacks of a run's harness failures go: one local file per run,
    ``DIRECTORY/RUN_ID.log``, appended to (docs/runner.md, "Harness failures").

    Never the ledger, which keeps the one-line error that names this file: a traceback
    holds machine paths and source lines, which are no evidence of the run. Every known
    secret is scrubbed from what is written (and from the one-line error), as from
    everything recorded; ``debug`` (``run --debug``) prints each traceback as it is written.
    """

    def __init__(
        self,
        directory: str,
        run_id: str,
        *,
        secrets: Iterable[str] = (),
        debug: bool = False,
    ) -> None:
        self.path = os.path.join(directory, f"{run_id}.log")
        self._scrub = scrubber(*sorted({s for s in secrets if s}))
        self.debug = debug

    def scrub(self, text: str) -> str:
        """``text`` with every known secret replaced."""
        return self._scrub.text(text)

    def write(self, where: str, exc: BaseException) -> str:
        """Append ``exc``'s traceback under a heading naming ``where`` (the unit's stream
        and stage); the file it went to, or why it could not be written."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        text = self.scrub("".join(traceback.format_exception(exc)))
        entry = f"== {stamp} {where}\n{text}\n"
        if self.debug:
            print(entry, end="", file=sys.stderr, flush=True)
        try:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(entry)
        except OSError as err:
            return f"traceback not written to {self.path}: {err.strerror or err}"
        return f"traceback in {self.path}"
