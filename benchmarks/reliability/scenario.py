"""What every reliability scenario shares: its row and configuration, child commands, and
reading back (and judging) the ledgers they leave."""

from __future__ import annotations

import collections
import contextlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from benchledger import protocols
from benchledger.harness.settings import Settings
from benchledger.ledger import Ledger, LedgerError, open_store
from benchledger.ledger.events import (
    RunStartedEvent,
    UnitAbandonedEvent,
    UnitFinishedEvent,
    UnitStartedEvent,
)
from benchledger.projections.fold import fold
from benchledger.projections.source import open_run
from benchledger.projections.suites.lifecycle.scorecard import LifecycleFold, scorecard

# The checkout (this file is benchmarks/reliability/scenario.py in it, reached through the
# benchledger/benchmarks link).
ROOT: Final = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
CORPUS: Final = os.path.join(ROOT, "tests", "data", "bad")
UNIT_LINE: Final = re.compile(r"^unit (\d+)/(\d+) ")


@dataclass
class Row:
    """One scenario's line of the table."""

    scenario: str
    tried: str
    survived: str
    ok: bool | None  # None: skipped (the reason is in ``survived``)
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)  # why it failed
    notes: list[str] = field(default_factory=list)  # what to know even when it passed

    @property
    def result(self) -> str:
        return "skipped" if self.ok is None else ("PASS" if self.ok else "FAIL")


@dataclass
class Config:
    """How to run the selftest. ``main`` runs one command in-process (the bad-input corpus)
    with the settings it is given; ``settings`` are the command line's (the scenarios derive
    theirs from them) and ``environ`` the environment its child processes start with."""

    quick: bool = False
    seed: int = 0
    workdir: str = ""
    postgres: str = ""
    only: frozenset[str] = frozenset()
    main: Callable[[list[str], Settings], int] | None = None
    log: Callable[[str], None] = print
    kill_points: int = 0  # 0: 3 quick, 20 full
    interrupt_points: int = 0  # 0: 4 quick, 30 full
    protocols_limit: int = 0  # 0: a 6-protocol subset quick, the whole suite full
    settings: Settings = field(default_factory=Settings, repr=False)
    environ: Mapping[str, str] = field(default_factory=dict, repr=False)


def child_env(cfg: Config, **extra: str) -> dict[str, str]:
    """The environment of a child ``python -m benchledger``: the command line's (``cfg.environ``),
    this checkout first on the path."""
    env = dict(cfg.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH", "")) if p)
    env.pop("BENCHLEDGER_DEBUG", None)
    env.update(extra)
    return env


def cli(cfg: Config, args: Sequence[str], cwd: str, **env: str) -> subprocess.Popen[str]:
    """``python -m benchledger ARGS`` in a child process, as a user would run it."""
    return subprocess.Popen(
        [sys.executable, "-m", "benchledger", *args],
        cwd=cwd,
        env=child_env(cfg, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 1800) -> tuple[int, str, str]:
    """Wait for a child: (exit code, stdout, stderr)."""
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def subset(workdir: str, n: int) -> str:
    """A protocol folder holding the first ``n`` protocols of the committed set."""
    folder = os.path.join(workdir, f"protocols-{n}")
    if not os.path.isdir(folder):
        os.makedirs(folder)
        names = sorted(f for f in os.listdir(protocols.LIFECYCLE_DIR) if f.endswith(".yaml"))
        for name in names[:n]:
            shutil.copy(os.path.join(protocols.LIFECYCLE_DIR, name), folder)
    return folder


def suite_options(cfg: Config, workdir: str, quick_n: int) -> tuple[list[str], str]:
    """``--protocols`` arguments and a label: a subset in quick mode, the suite in full."""
    n = cfg.protocols_limit or (quick_n if cfg.quick else 0)
    if not n:
        return [], "the lifecycle suite"
    return ["--protocols", subset(workdir, n)], f"{n} lifecycle protocols"


@contextlib.contextmanager
def reader(location: str) -> Iterator[Ledger]:
    """The ledger at ``location``, opened to read (read-only when it is a file), then closed."""
    ledger = Ledger(open_store(location, create=False, read_only="://" not in location))
    try:
        yield ledger
    finally:
        ledger.store.close()


@dataclass
class Units:
    """A run's units as its events tell them."""

    planned: list[tuple[str, int]]
    finished: collections.Counter[tuple[str, int]]
    abandoned: int
    errors: dict[str, str]  # stream -> error of units that finished with one

    def exactly_once(self) -> list[str]:
        """What breaks "every planned unit finished exactly once" (empty when nothing)."""
        out = [
            f"{p}/{a} finished {self.finished[(p, a)]} times"
            for p, a in self.planned
            if self.finished[(p, a)] != 1
        ]
        extra = set(self.finished) - set(self.planned)
        out += [f"{p}/{a} finished but was never planned" for p, a in sorted(extra)]
        return out


def units_of(events: Sequence[tuple[Any, str]]) -> Units:
    """The units a run's events plan, finish and abandon."""
    planned: list[tuple[str, int]] = []
    keys: dict[str, tuple[str, int]] = {}
    finished: collections.Counter[tuple[str, int]] = collections.Counter()
    abandoned = 0
    errors: dict[str, str] = {}
    for event, _ in events:
        if isinstance(event, RunStartedEvent) and event.body.record is not None:
            planned = [(u.unit_id, u.attempt) for u in event.body.record.units]
        elif isinstance(event, UnitStartedEvent):
            keys[event.stream] = (event.body.protocol_id, event.body.attempt)
        elif isinstance(event, UnitFinishedEvent) and event.stream in keys:
            finished[keys[event.stream]] += 1
            if event.body.error:
                errors[event.stream] = event.body.error
        elif isinstance(event, UnitAbandonedEvent):
            abandoned += 1
    return Units(planned, finished, abandoned, errors)


def metrics(events: Sequence[tuple[Any, str]]) -> dict[str, tuple[float, int]]:
    """A lifecycle run's metrics as (rate, denominator), to compare two runs exactly."""
    card = scorecard([fold(LifecycleFold(), events)])
    return {name: (round(m.num, 9), m.den) for name, m in card.metrics.items()}


def verify_run(location: str, run_id: str, *, sealed: bool) -> tuple[Any, str]:
    """(the verified run, "") or (None, why it does not verify)."""
    try:
        with reader(location) as ledger:
            return open_run(run_id, ledger, require_seal=sealed, allow_partial=False), ""
    except LedgerError as exc:
        return None, str(exc)


def one_line(err: str) -> list[str]:
    """Problems with a child's stderr: more than one line, or a traceback."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    out = []
    if len(lines) != 1:
        shown = err.strip() if len(err) < 1500 else err.strip()[:1200] + " ... " + err[-300:]
        out.append(f"stderr has {len(lines)} lines, not one: {shown!r}")
    if "Traceback" in err:
        out.append("a traceback on stderr")
    return out


def mount(folder: str, size: str, *, remount: bool = False) -> bool:
    """Mount (or resize) a tmpfs at ``folder``; False when this machine does not allow it."""
    opts = f"remount,size={size}" if remount else f"size={size}"
    argv = (
        ["mount", "-o", opts, folder]
        if remount
        else ["mount", "-t", "tmpfs", "-o", opts, "tmpfs", folder]
    )
    if shutil.which("mount") is None or (hasattr(os, "geteuid") and os.geteuid() != 0):
        return False
    done = subprocess.run(argv, capture_output=True, text=True)
    return done.returncode == 0


def umount(folder: str) -> None:
    """Unmount what ``mount`` mounted at ``folder``."""
    subprocess.run(["umount", "-l", folder], capture_output=True)  # lazy: never left behind


def stop_and_resume(
    cfg: Config,
    name: str,
    work: str,
    location: str,
    run_id: str,
    first: subprocess.Popen[str],
    expect: str,
    after: Callable[[], object],
    resume_env: dict[str, str] | None = None,
) -> tuple[list[str], str]:
    """The common part of a storage fault: one line and exit 1, committed events verify,
    ``after()`` makes room, a resume seals the run with every unit once."""
    problems: list[str] = []
    code, _, err = finish(first)
    stopped = code == 1
    if code == 0:
        how = "the run survived the fault (the store recovered on its own)"
    elif code != 1:
        problems.append(f"{name}: exit {code}, not 1: {err.strip()[-300:]}")
        how = f"exit {code}"
    else:
        problems += one_line(err)
        if expect not in err or "resume with" not in err:
            problems.append(f"{name}: the line does not say {expect!r} and how to resume: {err!r}")
        how = "stopped with one line (exit 1)"
    _, why = verify_run(location, run_id, sealed=False)
    if why:
        problems.append(f"what was committed does not verify: {why}")
    after()
    if stopped:
        code, _, err = finish(
            cli(cfg, ["run", "--resume", run_id, "--ledger", location], work, **(resume_env or {}))
        )
        if code != 0:
            problems.append(f"the resume exited {code}: {err.strip()[-300:]}")
    run, why = verify_run(location, run_id, sealed=True)
    if why:
        problems.append(f"the resumed run does not verify: {why}")
    elif run is not None:
        problems += units_of(run.events).exactly_once()
    return problems, how
