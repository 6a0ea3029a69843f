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
