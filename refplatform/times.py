"""Timestamps on the wire: RFC 3339 in UTC with microseconds, as the peer writes them."""

from __future__ import annotations

import datetime as dt

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def rfc3339(ns: int) -> str:
    """Nanoseconds since the epoch as ``2026-08-01T18:58:09.050592Z``."""
    stamp = _EPOCH + dt.timedelta(microseconds=ns // 1000)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc3339_seconds(ns: int) -> str:
    """Nanoseconds since the epoch as ``2026-08-01T18:58:09Z`` (whole seconds)."""
    stamp = _EPOCH + dt.timedelta(microseconds=ns // 1000)
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse(value: str) -> int | None:
    """RFC 3339 text -> nanoseconds, or None when it is not a time (callers ignore it)."""
    try:
        stamp = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.UTC)
    return (stamp - _EPOCH) // dt.timedelta(microseconds=1) * 1000
