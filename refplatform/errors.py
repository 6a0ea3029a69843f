"""refplatform's error tree. ``PlatformError`` carries the HTTP status it maps to."""

from __future__ import annotations


class PlatformError(Exception):
    """Root of refplatform errors; ``status`` is the HTTP status a REST route answers with."""

    status = 400

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


class NotFound(PlatformError):
    status = 404


class Forbidden(PlatformError):
    status = 403


class Conflict(PlatformError):
    """An invalid status transition (409)."""

    status = 409


class EmbedderError(PlatformError):
    """The embedding backend failed (unreachable, bad answer)."""

    status = 502


class ToolError(PlatformError):
    """A failed tool call in the peer's error contract: ``{code, category, message, hint}``.

    The defaults are the contract's fallback for an error its source did not classify
    (``tool_error``/``tool_error``, no hint), which is how most of the peer's toolkits
    report a failure.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str = "tool_error",
        category: str = "tool_error",
        hint: str = "",
        status: int | None = None,
    ) -> None:
        super().__init__(message, status=status)
        self.code = code
        self.category = category
        self.hint = hint

    def envelope(self) -> dict[str, str]:
        """The structured ``error`` object of the tool result."""
        body = {"code": self.code, "category": self.category, "message": self.message}
        if self.hint:
            body["hint"] = self.hint
        return body

    def agent_text(self) -> str:
        """The text block the model reads: message, ``(code: X)`` and ``Hint: ...``."""
        text = f"{self.message} (code: {self.code})"
        return f"{text} Hint: {self.hint}" if self.hint else text


class Unprocessable(PlatformError):
    """A well-formed request the platform cannot carry out (422), e.g. an unrevertible rollback."""

    status = 422


class Unavailable(PlatformError):
    """A part the platform needs could not start (its SQL engine, say): it serves nothing."""

    status = 503


class PackError(PlatformError):
    """A seed pack that cannot be loaded; the message is one line: ``file:line: what is wrong``."""

    status = 500

    def __init__(self, file: str, line: int | None, what: str) -> None:
        where = f"{file}:{line}" if line is not None else file
        super().__init__(f"{where}: {what}")
        self.file = file
        self.line = line
        self.what = what
