"""The suite interface the driver runs: load items, then run one unit of an item."""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

from harness.unit import UnitContext


class Loaded(NamedTuple):
    """A suite's items (each with an ``id``), their set hash and where they came from."""

    items: list[Any]
    set_hash: str
    path: str


class Suite(Protocol):
    """What the driver needs from a suite; the lifecycle is one, the provenance lane another."""

    name: str
    identities_per_unit: int

    def default_path(self) -> str:
        """Where the suite's committed items live."""
        ...

    def load(self, path: str) -> Loaded:
        """The items at ``path`` (protocols.InvalidInput on a bad file)."""
        ...

    def entity(self, item: Any) -> str:
        """The shared resource units of this item write to (promotions serialise on it)."""
        ...

    async def run_unit(self, ctx: UnitContext) -> None:
        """Every stage of one unit; decisions go through ``ctx``; infra failures raise."""
        ...
