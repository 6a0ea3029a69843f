"""A registry of named extensions of one kind, open to other packages through entry points.

Platforms, suites, model providers and ledger backends are each found by name in one
``Registry``: benchledger registers its own (lazily, so listing names imports nothing
heavy), and an installed distribution adds its own through the kind's entry-point group
(``benchledger.platforms``, ``benchledger.suites``, ``benchledger.models``,
``benchledger.ledgers``), whose value names the object (``package.module:NAME``).
An entry point named like one of benchledger's own is shadowed: benchledger's is used, the
plugin is listed as shadowed, and naming it says so on stderr (docs/plugins.md).
docs/plugins.md shows a complete plugin. The registry lives in the ledger package only
because every layer may import it; it knows nothing of what it holds.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Generic, TypeVar, cast

from benchledger.ledger.errors import UnusableInput

T = TypeVar("T")

BUILTIN = "benchledger"  # the origin of what benchledger registers itself


class UnknownName(UnusableInput):
    """No extension of this kind is registered under the name (the known ones are listed)."""

    def __init__(self, kind: str, name: str, known: tuple[str, ...]) -> None:
        self.kind, self.name, self.known = kind, name, known
        super().__init__(
            f"{kind} {name!r}", f"no such {kind} (known: {', '.join(known) or 'none'})"
        )


class BrokenPlugin(UnusableInput):
    """An installed entry point could not be loaded, or loaded something of the wrong kind."""

    def __init__(self, kind: str, entry: str, problem: str) -> None:
        self.kind, self.entry = kind, entry
        super().__init__(f"{kind} plugin {entry}", problem)


@dataclass(frozen=True)
class Entry(Generic[T]):
    """One registered name: how to get its object, and where it came from."""

    name: str
    load: Callable[[], T]
    origin: str  # "benchledger", or the distribution and version that installed it
    where: str = ""  # the module path (``package.module:NAME``) where known


class Registry(Generic[T]):
    """Named objects of one kind: registered in code, or found in an entry-point group.

    ``check`` (optional) validates a loaded object and returns it typed; a plugin that fails
    it is a ``BrokenPlugin``. Entry points are read once, on the first lookup or listing;
    a name registered in code wins over an entry point of the same name, which is kept as
    ``shadowed`` (listed, and warned of when its name is looked up).
    """

    def __init__(self, kind: str, group: str, check: Callable[[object], T] | None = None):
        self.kind = kind
        self.group = group
        self._check = check
        self._entries: dict[str, Entry[T]] = {}
        self._loaded: dict[str, T] = {}
        self._shadowed: dict[str, list[Entry[T]]] = {}
        self._warned: set[str] = set()
        self._scanned = False
        self._lock = threading.Lock()

    def register(
        self, name: str, load: Callable[[], T], *, origin: str = BUILTIN, where: str = ""
    ) -> None:
        """Make ``load()`` the object called ``name`` (replacing one of that name)."""
        with self._lock:
            self._entries[name] = Entry(name, load, origin, where)
            self._loaded.pop(name, None)

    def add(self, name: str, obj: T, *, origin: str = BUILTIN) -> T:
        """Register an object already made; returns it (usable as a decorator's body)."""
        self.register(name, lambda: obj, origin=origin)
        return obj

    def unregister(self, name: str) -> None:
        """Forget ``name`` (a test's toy extension, once the test is done)."""
        with self._lock:
            self._entries.pop(name, None)
            self._loaded.pop(name, None)

    def _scan(self) -> None:
        if self._scanned:
            return
        found = _installed(tuple(sys.path)).get(self.group, ())
        with self._lock:
            self._scanned = True
            for ep in found:
                entry = Entry(ep.name, cast(Callable[[], T], ep.load), _origin(ep), ep.value)
                if ep.name not in self._entries:
                    self._entries[ep.name] = entry
                else:  # named like one registered in code: that one wins
                    self._shadowed.setdefault(ep.name, []).append(entry)

    def entries(self) -> list[Entry[T]]:
        """Every registered name (built-in and installed), sorted by name."""
        self._scan()
        return sorted(self._entries.values(), key=lambda e: e.name)

    def shadowed(self) -> list[Entry[T]]:
        """Installed entry points never used: each named like an entry registered in code
        (benchledger's own), which wins. Sorted by name."""
        self._scan()
        return sorted((e for found in self._shadowed.values() for e in found),
                      key=lambda e: (e.name, e.origin))  # fmt: skip

    def names(self) -> tuple[str, ...]:
        """The registered names, sorted."""
        return tuple(e.name for e in self.entries())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.names()

    def lookup(self, name: str, *, quiet: bool = False) -> T:
        """The object called ``name``; UnknownName lists the known ones, BrokenPlugin says
        why an installed one could not be used. When an installed plugin of that name is
        shadowed, one warning line on stderr says which is used (once per name; ``quiet``:
        a listing or a walk over every entry, which chooses nothing, says nothing)."""
        self._scan()
        if not quiet and name in self._shadowed and name not in self._warned:
            self._warn_shadowed(name)
        if name in self._loaded:
            return self._loaded[name]
        entry = self._entries.get(name)
        if entry is None:
            raise UnknownName(self.kind, name, self.names())
        try:
            obj = entry.load()
        except UnusableInput:
            raise
        except Exception as exc:  # a third party's import error: one line, never a traceback
            raise BrokenPlugin(
                self.kind, f"{name} = {entry.where or entry.origin}",
                f"cannot be loaded ({type(exc).__name__}: {exc})",
            ) from exc  # fmt: skip
        if self._check is not None:
            try:
                obj = self._check(obj)
            except (TypeError, ValueError) as exc:
                raise BrokenPlugin(
                    self.kind, f"{name} = {entry.where or entry.origin}", str(exc)
                ) from exc
        with self._lock:
            self._loaded[name] = obj
        return obj

    def _warn_shadowed(self, name: str) -> None:
        with self._lock:
            self._warned.add(name)
        theirs = "; ".join(f"{e.origin} ({e.where})" for e in self._shadowed[name])
        print(f"benchledger: warning: {self.kind} {name!r} is benchledger's own; the installed "
              f"{self.kind} plugin of the same name, {theirs}, is shadowed and not used: "
              "rename its entry point", file=sys.stderr)  # fmt: skip


@functools.lru_cache(maxsize=4)
def _installed(path: tuple[str, ...]) -> dict[str, tuple[EntryPoint, ...]]:
    """Every installed entry point by group, read once per search path ``path`` (each read
    walks every distribution's metadata: about 12 ms here, and a run asks four registries)."""
    every = entry_points()
    return {group: tuple(every.select(group=group)) for group in every.groups}


def _origin(ep: EntryPoint) -> str:
    dist = ep.dist
    return f"{dist.name} {dist.version}" if dist is not None else "an entry point"
