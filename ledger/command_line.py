"""A command line printed for the user to copy, each word shell-quoted (one helper for
every layer that prints one: a path with a space, or a ``postgresql://...?schema=x`` URL,
must paste as one word)."""

from __future__ import annotations

import shlex

__all__ = ["command_line"]


def command_line(*words: str) -> str:
    """``words`` as one line a POSIX shell splits back into exactly ``words``."""
    return shlex.join(words)
