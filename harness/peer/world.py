"""A pkrun arm's ``fixture-world.json``: the world the peer's fixture service served it.

``pollution-api-arm.sh`` writes the file from the fixture service's ``GET /_bench/world``
route, which serves the service's current world as its generator defines it (facts of the
peer's ``bench/internal/apigen/world.go`` and ``internal/apisvc``, docs/peer-studies.md):
one JSON object of exactly six fields (``profile``, ``monitors``, ``listening``,
``contract``, ``workspace_scoped``, ``workspaces``), each world one of the generator's
committed profiles, selected by name (an unknown name is refused at every entry point of
the service, so no other world is ever served). A world that is not one of them, or a
field that is not what its profile defines, is refused in one line naming the field.

What an arm's count question reads from it, as the generator defines it: the count the
world provisions is ``monitors`` (a world with N monitors has the pool's first N), the pool
is the generator's monitor pool (six monitors, ``MonitorPoolSize``), the world's name is
``profile``.
"""

from __future__ import annotations

import json
from typing import Any, Final, NamedTuple

from benchledger.ledger import UnusableInput

WORLD_FILE: Final = "fixture-world.json"
# The generator's monitor pool (``MonitorPoolSize``: the provisionable monitors).
MONITOR_POOL: Final = 6
_BASE_WORKSPACES: Final = 2  # what an ordinary account exposes (``baseWorkspaces``)
_GRANTED, _FORBIDDEN = "granted", "forbidden"
_C1, _C2 = "2026.1", "2026.2"
FIELDS: Final = ("profile", "monitors", "listening", "contract", "workspace_scoped", "workspaces")


class World(NamedTuple):
    """One world as the fixture service serves it (the generator's ``World``)."""

    profile: str
    monitors: int
    listening: str
    contract: str
    workspace_scoped: bool
    workspaces: int


def _w(profile: str, monitors: int, listening: str = _GRANTED, contract: str = _C1,
       scoped: bool = False, workspaces: int = _BASE_WORKSPACES) -> World:  # fmt: skip
    return World(profile, monitors, listening, contract, scoped, workspaces)


# The generator's committed world-profile registry, in its order (``worldProfiles``).
PROFILES: Final = (
    _w("monitors-0", 0),
    _w("monitors-1", 1),
    _w("monitors-3", 3),
    _w("monitors-6", 6),
    _w("monitors-0-forbidden", 0, _FORBIDDEN),
    _w("monitors-3-forbidden", 3, _FORBIDDEN),
    _w("monitors-0-released", 0, contract=_C2),
    _w("monitors-3-released", 3, contract=_C2),
    _w("monitors-0-scoped", 0, scoped=True),
    _w("monitors-3-scoped", 3, scoped=True),
    _w("monitors-0-scoped-5", 0, scoped=True, workspaces=5),
    _w("monitors-0-scoped-10", 0, scoped=True, workspaces=10),
    _w("monitors-3-scoped-5", 3, scoped=True, workspaces=5),
    _w("monitors-3-scoped-10", 3, scoped=True, workspaces=10),
)
_BY_NAME: Final = {w.profile: w for w in PROFILES}
# What a count question (``<thing>-count``) reads: the world's field of that count and the
# generator's pool of that thing (its pool-total trap).
COUNTS: Final = {"monitor": ("monitors", MONITOR_POOL)}


def _shown(value: Any) -> str:
    """A value as JSON, bounded: a number of hundreds of digits is named by its length."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**40:
        return f"a number of {len(str(abs(value)))} digits"
    return json.dumps(value)[:40]


def read_world(path: str, data: Any) -> World:
    """The served world in ``data`` (``path``'s JSON); UnusableInput naming ``path`` and the
    field when it is no world the generator defines."""
    if not isinstance(data, dict):
        raise UnusableInput(path, "not a fixture world: the top level must be an object "
                            f"with the fields {', '.join(FIELDS)}")  # fmt: skip
    extra = next((k for k in data if k not in FIELDS), None)
    if extra is not None:
        raise UnusableInput(path, f"field {extra!r} is no field of the fixture service's "
                            f"world ({', '.join(FIELDS)})")  # fmt: skip
    missing = next((k for k in FIELDS if k not in data), None)
    if missing is not None:
        raise UnusableInput(path, f"field {missing!r} is missing: the fixture service writes "
                            "every field of its world")  # fmt: skip
    name = data["profile"]
    known = _BY_NAME.get(name) if isinstance(name, str) else None
    if known is None:
        raise UnusableInput(path, f"field 'profile' is {_shown(name)}, no world profile the "
                            f"generator defines ({', '.join(_BY_NAME)})")  # fmt: skip
    for key, want in zip(FIELDS, known, strict=True):
        got = data[key]
        if type(got) is not type(want) or got != want:
            raise UnusableInput(path, f"field {key!r} is {_shown(got)}, but the world profile "
                                f"{name!r} is served with {_shown(want)}")  # fmt: skip
    return known


def counted(path: str, world: World, question: str, thing: str) -> tuple[int, int, str]:
    """(the count ``world`` provisions, the generator's pool of it, the field read) for a
    count question about ``thing``; UnusableInput naming the question when the world
    provisions no such thing."""
    known = COUNTS.get(thing)
    if known is None:
        provisions = ", ".join(f"{t}s" for t in COUNTS)
        raise UnusableInput(path, f"question {question!r} counts {thing}s, which the fixture "
                            f"world does not provision ({provisions})")  # fmt: skip
    field, pool = known
    return int(getattr(world, field)), pool, field
