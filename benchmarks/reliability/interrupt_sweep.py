"""The interrupt sweep: fake-model runs sent SIGINT and SIGTERM at random points, each
resumed; no interrupt is ever recorded as a unit's failure (docs/reliability.md).

A point is a count of ledger events: the sweep polls the run's stream heads and signals
the child as soon as the ledger holds that many, so the signal lands right after a commit,
while other units are in an episode, a platform session, a promotion or a commit of their
own. Each interrupted child must exit 130 (SIGINT) or 143 (SIGTERM) with the resume line,
leave a ledger that verifies and holds no unit error; every run, resumed to its end, must be
sealed with every unit finished exactly once, passing, and no harness failure.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
from typing import Final

from benchledger.benchmarks.reliability.scenario import (
    Config,
    Row,
    cli,
    finish,
    metrics,
    reader,
    suite_options,
    units_of,
    verify_run,
)

SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)
EXIT_FOR: Final = {signal.SIGINT: 130, signal.SIGTERM: 143}  # 128 + the signal
AGENT: Final = "fake:0.02"  # a fake model answering in 20 ms: the run spends time in sessions
POLL_S: Final = 0.01  # how often the ledger is counted while waiting for a point
RESUME: Final = "Resume with:"


def ledger_events(location: str, run_id: str) -> int:
    """How many events the ledger holds for ``run_id`` (0 before it exists)."""
    if not os.path.exists(location):
        return 0
    try:
        with reader(location) as ledger:
            return sum((h.seq or 0) + 1 for h in ledger.store.heads(run_id))
    except Exception:  # created but not yet a ledger, or the run not started: nothing yet
        return 0


def signal_at(
    proc: subprocess.Popen[str], location: str, run_id: str, events: int, signum: int
) -> bool:
    """Send ``signum`` once the ledger holds ``events`` events of ``run_id``; False when the
    child ended first (the run finished before the point)."""
    while proc.poll() is None:
        if ledger_events(location, run_id) >= events:
            proc.send_signal(signum)
            return True
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=POLL_S)  # the child's end, or the next count
    return False


def sealed(location: str, run_id: str) -> bool:
    """Whether ``run_id`` is sealed in the ledger at ``location``."""
    with reader(location) as ledger:
        return ledger.store.heads(run_id)[0].kind == "run_sealed"


def interrupt_sweep(cfg: Config) -> Row:
    """SIGINT and SIGTERM, alternately, at random event counts of fake-model runs."""
    work = os.path.join(cfg.workdir, "interrupt")
    os.makedirs(work, exist_ok=True)
    suite_args, label = suite_options(cfg, work, 6)
    points = cfg.interrupt_points or (4 if cfg.quick else 30)
    rng = random.Random(cfg.seed)
    location = os.path.join(work, "interrupted.sqlite")
    problems: list[str] = []
    runs: list[str] = []
    current = ""  # the run being interrupted and resumed (unsealed)
    # Each segment runs this many new events at most before its signal (a fake-model run of
    # the whole suite writes ~1,800): several points land in every run.
    span = 60 if cfg.quick else 250
    sent = 0
    while sent < points:
        if not current:
            current = f"int{len(runs) + 1}"
            runs.append(current)
            args = ["run", "--run-id", current, "--agent", AGENT, *suite_args]
        else:
            args = ["run", "--resume", current]
        target = ledger_events(location, current) + rng.randint(1, span)
        signum = SIGNALS[sent % 2]
        proc = cli(cfg, [*args, "--ledger", location], work)
        signalled = signal_at(proc, location, current, target, signum)
        code, _, err = finish(proc)
        if not signalled:  # it finished before the point: the run is complete
            if code != 0:
                problems.append(f"{current}: a segment exited {code}: {err.strip()[-300:]}")
                break
            current = ""
            continue
        sent += 1
        name = signal.Signals(signum).name
        if code != EXIT_FOR[signum]:
            problems.append(f"{current}: {name} at event {target}: exit {code}, not "
                            f"{EXIT_FOR[signum]}: {err.strip()[-300:]}")  # fmt: skip
        if "Traceback" in err:
            problems.append(f"{current}: {name} at event {target}: a traceback on stderr")
        if sealed(location, current):  # the signal came after the seal: nothing to resume
            current = ""
            continue
        if RESUME not in err or f"--resume {current}" not in err:
            problems.append(f"{current}: {name} at event {target}: no resume line: {err!r}")
        run, why = verify_run(location, current, sealed=False)
        if why:
            problems.append(f"{current}: after {name} at event {target}: {why}")
        elif errors := units_of(run.events).errors:
            stream, error = next(iter(errors.items()))
            problems.append(f"{current}: {name} at event {target} recorded a unit error: "
                            f"{stream}: {error}")  # fmt: skip
    if current:  # the last run, resumed to its end
        code, _, err = finish(cli(cfg, ["run", "--resume", current, "--ledger", location], work))
        if code != 0:
            problems.append(f"{current}: the final resume exited {code}: {err.strip()[-300:]}")
    passed = 0
    for run_id in runs:
        wrong = judged(location, run_id)
        problems += wrong
        passed += not wrong
    return Row(
        "interrupt sweep",
        f"SIGINT and SIGTERM, alternately, at {sent} random points (seed {cfg.seed}) of "
        f"{len(runs)} fake-model run(s) of {label}, resumed after each",
        f"every interrupted child exited 130/143 with the resume line and left no unit "
        f"error; {passed}/{len(runs)} runs sealed, every unit finished once and passed, no "
        "harness failure",
        not problems,
        problems=problems,
    )


def judged(location: str, run_id: str) -> list[str]:
    """What is wrong with a swept run at its end: unsealed, not verifying, a unit finished
    other than once, a unit error, or a metric short of every unit passing."""
    run, why = verify_run(location, run_id, sealed=True)
    if why:
        return [f"{run_id}: does not verify sealed: {why}"]
    units = units_of(run.events)
    out = [f"{run_id}: {p}" for p in units.exactly_once()]
    out += [f"{run_id}: harness failure {s}: {e}" for s, e in units.errors.items()]
    num, den = metrics(run.events)["pass_k"]
    if num != den or den != len(units.planned):
        out.append(f"{run_id}: pass_k {num:g}/{den} of {len(units.planned)} planned units")
    return out
