"""The suite interface the driver runs: load items, then run one unit of an item.

Everything the driver, the unit runner, full replay and the command line ask of a suite
is here, so none of them tells suites apart by name: a new suite is a class with these
attributes, made by the ``harness`` factory of its ``SuitePlugin`` (``projections.suites``),
its one registration.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:  # the registry stays light: the CLI lists suites before any run starts
    from benchledger.harness.episode import ToolSets
    from benchledger.harness.record import RunConfig
    from benchledger.harness.unit import UnitContext
    from benchledger.ledger.events import RunRecord

Outcome = Mapping[str, bool | None]  # a unit's verdict per check (None: not judged)


class Loaded(NamedTuple):
    """A suite's items (each with an ``id``), their set hash and where they came from."""

    items: list[Any]
    set_hash: str
    path: str


class Suite(Protocol):
    """What the driver needs from a suite; the lifecycle is one, the provenance lane another."""

    name: str
    identities_per_unit: int
    run_prefix: str  # a new run's id starts with it (``lc-20260101-...``)
    item_noun: str  # what one item is called in messages: "protocol", "case"
    tools: ToolSets  # whether its episodes record searches and captures (by the vocabulary)

    def default_path(self) -> str:
        """Where the suite's committed items live."""
        ...

    def load(self, path: str) -> Loaded:
        """The items at ``path`` (protocols.InvalidInput on a bad file)."""
        ...

    def entity(self, item: Any) -> str:
        """The shared resource units of this item write to (promotions serialise on it)."""
        ...

    def item_hash(self, item: Any) -> str:
        """The item's content hash as its ``unit_started`` records it ("" for none)."""
        ...

    def passed(self, outcome: Outcome) -> bool:
        """Whether a unit that ended without an error passed, by its verdicts."""
        ...

    def unit_status(self, outcome: Outcome) -> str:
        """A unit that ended without an error, in a word or two for the progress line."""
        ...

    def settle(self, config: RunConfig, external: bool) -> None:
        """Fill the suite's defaults into ``config`` and check its options (RunRefused)."""
        ...

    def configure(self, record: RunRecord) -> None:
        """Take the suite's own settings from the run's record (new, resumed or replayed)."""
        ...

    async def run_unit(self, ctx: UnitContext) -> None:
        """Every stage of one unit; decisions go through ``ctx``; infra failures raise."""
        ...


def run_config(suite: Suite) -> dict[str, Any]:
    """What a new run's ``run_started.config`` records for ``suite``: its optional
    ``run_config()`` (the tasks suite records its tasks there, so the read side needs no
    file), {} for a suite without one."""
    own = getattr(suite, "run_config", None)
    return dict(own()) if callable(own) else {}
