"""A platform as one registered object: its ``--platform`` spec, options, provisioning, replay.

Each memory platform benchledger can run against is one ``Platform``, registered by name
in ``PLATFORMS`` (benchledger's own lazily; another distribution's through the
``benchledger.platforms`` entry-point group, docs/plugins.md). It says

- which ``--platform`` texts are its own (``parse``) and how its own options combine with
  one (``settle``): ``server-memory`` with ``--server-memory-cmd``, a URL with its keys;
- which options it adds to ``benchledger run`` (``options``: the command line builds them
  from the registry, and refuses one given with another platform);
- how it is started or reached for a run (``provisioner``), whose ``record`` is the run
  record's platform entry and whose runtimes hand out ``PlatformClient`` s;
- how full replay serves it again from a run's log (``replay``: the ``module:Name`` of
  a twin adapter taking ``(tape, pool_size=N)``), or why it cannot (``not_replayable``).

Nothing here imports an adapter: a platform's module is loaded when it is looked up.
"""

from __future__ import annotations

import dataclasses
import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import ClassVar, Final, NamedTuple

from benchledger.harness.platforms.base import Description, PlatformClient
from benchledger.harness.settings import Settings
from benchledger.ledger.events import PlatformRecord
from benchledger.ledger.registry import BUILTIN, BrokenPlugin, Registry

GROUP = "benchledger.platforms"


class PlatformSpec(NamedTuple):
    """A parsed ``--platform``: the record's ``kind`` and what it names (``url``)."""

    kind: str
    url: str = ""

    @property
    def label(self) -> str:
        """How the platform is named in a run record (never with a key)."""
        return self.url or ("embedded:process" if self.kind == "process" else "embedded")


class PlatformOption(NamedTuple):
    """One option a platform adds to ``benchledger run``.

    ``dest`` (the flag without dashes, ``_`` for ``-``) names its value: a ``RunConfig``
    field of that name (the run-level ones a shared platform uses: ``admin_key``,
    ``pool_base``, ``pool_size``, ``reset_cmd``) is set from it, any other lands in
    ``RunConfig.platform_options``. ``setting``: the ``Settings`` field it defaults to.
    ``purpose``: what it does, said when it is given with another platform.
    """

    flag: str
    help: str
    metavar: str = "VALUE"
    setting: str = ""
    purpose: str = ""
    whole: bool = False  # its value is a whole number >= 1
    recorded: bool = False  # kept in the run's record and restored on resume (no secrets)

    @property
    def dest(self) -> str:
        """The option's name in ``RunConfig`` (``--pool-size`` -> ``pool_size``)."""
        return self.flag.removeprefix("--").replace("-", "_")


@dataclasses.dataclass(frozen=True)
class Provision:
    """What a run hands a platform's provisioner: its pool and the options given."""

    pool_size: int
    options: Mapping[str, str] = dataclasses.field(default_factory=dict)
    admin_key: str = ""  # a shared platform's keys (never recorded)
    pool_base: str = ""
    reset_cmd: str = ""  # run between passes on a shared platform
    k: int = 1
    pack: str = ""  # the seed pack of a platform that takes one
    settings: Settings = dataclasses.field(default_factory=Settings)


class Provisioner(ABC):
    """Hands out platform clients for a run; ``fresh_state`` says each runtime starts clean."""

    fresh_state: bool

    def __init__(self, spec: PlatformSpec, *, pool_size: int) -> None:
        self.spec = spec
        self.pool_size = pool_size

    @abstractmethod
    def runtime(self) -> AbstractAsyncContextManager[PlatformClient]:
        """A client for one scope (a pass, or a unit), closed (and stopped) on exit."""

    def between_passes(self) -> None:  # noqa: B027 - a hook: most platforms need nothing
        """What must happen before the next pass reuses the platform (nothing by default)."""

    @property
    def coupled(self) -> bool:
        """Whether passes share platform state (so one pass can answer another's questions)."""
        return False

    def run_label(self, described: Description) -> str:
        """How ``run_started`` names the platform: what it said it is."""
        return described.name

    def record(self, described: Description) -> PlatformRecord:
        """The run record's platform entry: kind, URL, and what the platform said it is."""
        return PlatformRecord(
            kind=self.spec.kind,
            url=self.spec.url,
            name=described.name,
            version=described.version,
            stages=list(described.stages),
            sinks=list(described.sinks),
        )


class Platform(ABC):
    """One memory platform benchledger runs against (see the module docstring).

    A subclass sets ``name`` and implements ``provisioner``; the defaults fit a platform
    started fresh for every pass, named by ``NAME`` or ``NAME@VERSION``, with no options.
    """

    name: ClassVar[str] = ""
    # What ``benchledger platforms`` says it is, in one line.
    summary: ClassVar[str] = ""
    # The run-record kinds (``PlatformRecord.kind``) it writes; a resume and a replay find
    # the platform by them (default: its name).
    kinds: ClassVar[tuple[str, ...]] = ()
    options: ClassVar[tuple[PlatformOption, ...]] = ()
    # One running platform shared by every pass: its pool is ``--pool-size``, it is reset
    # between passes by ``--reset-cmd``, and a fresh platform per unit is impossible.
    shared: ClassVar[bool] = False
    seeded: ClassVar[bool] = False  # takes ``--pack`` (a seed pack)
    # The twin adapter full replay serves it with from a log (``module:Name``, called as
    # ``Name(tape, pool_size=N)``); "" with ``not_replayable`` saying why there is none.
    replay: ClassVar[str] = ""
    not_replayable: ClassVar[str] = "it names no adapter to serve it from a log"
    # Live full replay (``--tools live``) re-drives units on the embedded platform; a run on
    # another platform replays from its log only, unless this says otherwise.
    live_replay: ClassVar[bool] = False

    def record_kinds(self) -> tuple[str, ...]:
        """The run-record kinds this platform writes (``kinds``, else its name)."""
        return self.kinds or (self.name,)

    def usage(self) -> str:
        """How ``--platform`` names it, for messages (``NAME[@VERSION]``)."""
        return f"{self.name}[@VERSION]"

    def parse(self, text: str) -> PlatformSpec | None:
        """The spec ``text`` names if it is this platform's (None if not); ValueError,
        naming ``--platform``, when it is this platform's but unusable."""
        if text == self.name or text.startswith(f"{self.name}@"):
            return PlatformSpec(self.name, text)
        return None

    def settle(self, spec: PlatformSpec, options: Mapping[str, str]) -> PlatformSpec:
        """The spec with this platform's own options folded in (e.g. a command that starts
        it); ValueError naming the option when they do not go together. Default: as is."""
        return spec

    def check_record(self, record: PlatformRecord) -> None:  # noqa: B027 - a hook
        """Whether a resume reaches the platform a run recorded: ValueError saying how it
        differs now (default: nothing to check beyond the spec)."""

    @abstractmethod
    def provisioner(self, spec: PlatformSpec, provision: Provision) -> Provisioner:
        """What starts or reaches the platform for a run; ValueError on an unusable option."""


def _platform(obj: object) -> Platform:
    """A loaded entry point as a Platform (a Platform subclass is instantiated)."""
    if isinstance(obj, type) and issubclass(obj, Platform):
        obj = obj()
    if not isinstance(obj, Platform):
        raise TypeError(
            f"is {type(obj).__name__}, not a benchledger Platform "
            "(benchledger.harness.platforms.platform.Platform)"
        )
    if not obj.name:
        raise TypeError("is a Platform without a name")
    return obj


PLATFORMS: Registry[Platform] = Registry("platform", GROUP, check=_platform)


def _load(where: str) -> Callable[[], Platform]:
    """A loader of the object ``module:NAME`` names: how benchledger's own are registered,
    the same way an entry point names a plugin's (the module loads on first lookup)."""
    module, _, name = where.partition(":")
    return lambda: _platform(getattr(importlib.import_module(module), name))


# benchledger's own (harness/platforms/builtin.py), loaded on first lookup; their adapters
# load only when a run provisions one.
BUILTINS: Final = (
    ("embedded", "EMBEDDED"),
    ("embedded:process", "PROCESS"),
    ("server-memory", "SERVER_MEMORY"),
    ("basic-memory", "BASIC_MEMORY"),
    ("mem0", "MEM0"),
    ("mcp", "MCP"),
    ("url", "URL"),
)
for _name, _attr in BUILTINS:
    _where = f"benchledger.harness.platforms.builtin:{_attr}"
    PLATFORMS.register(_name, _load(_where), where=_where)


def declared_options() -> list[PlatformOption]:
    """Every option the installed platforms declare, each flag once (its first declaration)."""
    seen: dict[str, PlatformOption] = {}
    for platform in every():
        for option in platform.options:
            seen.setdefault(option.flag, option)
    return list(seen.values())


def every() -> list[Platform]:
    """Every registered platform that loads: benchledger's first, in their own order, then
    plugins by name (a plugin that cannot be loaded is left out here; looking it up by name
    says why)."""
    order = {name: i for i, (name, _) in enumerate(BUILTINS)}
    entries = sorted(
        PLATFORMS.entries(), key=lambda e: (e.origin != BUILTIN, order.get(e.name, 0), e.name)
    )
    found = []
    for entry in entries:
        try:
            found.append(PLATFORMS.lookup(entry.name, quiet=True))  # choosing none: no warning
        except BrokenPlugin:
            continue
    return found


def resolve(text: str) -> tuple[Platform, PlatformSpec]:
    """The platform ``--platform text`` names and its spec: by name (``NAME[@...]``), else
    the first platform that takes ``text`` (a URL, a recorded form); ValueError saying
    what is accepted."""
    name = text.partition("@")[0]
    if name in PLATFORMS:
        platform = PLATFORMS.lookup(name)
        spec = platform.parse(text)
        if spec is not None:
            return platform, spec
    for platform in every():
        spec = platform.parse(text)
        if spec is not None:
            return platform, spec
    usable = [p.usage() for p in every()]
    said = ", ".join(usable[:-1]) + f" or {usable[-1]}" if len(usable) > 1 else usable[0]
    raise ValueError(f"--platform {text!r}: use {said}")


def of_record(kind: str) -> Platform:
    """The platform that writes run-record kind ``kind`` (a resume, a replay);
    LookupError naming the installed ones when none does."""
    for platform in every():
        if kind in platform.record_kinds():
            return platform
    raise LookupError(
        f"no installed platform writes runs of kind {kind!r} (installed: "
        f"{', '.join(PLATFORMS.names())}); install the package that adds it"
    )


def owner_of(dest: str) -> tuple[Platform, PlatformOption] | None:
    """The platform declaring the option named ``dest``, and the option (None if none)."""
    for platform in every():
        for option in platform.options:
            if option.dest == dest:
                return platform, option
    return None
