"""The kill sweep: one run SIGKILLed at N points spread over it, resumed after each kill."""

from __future__ import annotations

import collections
import os
import signal

from benchledger.benchmarks.reliability.scenario import (
    UNIT_LINE,
    Config,
    Row,
    Units,
    cli,
    finish,
    metrics,
    reader,
    suite_options,
    units_of,
    verify_run,
)


def kill_sweep(cfg: Config) -> Row:
    """SIGKILL one run at N points spread over it, resuming after each kill."""
    work = os.path.join(cfg.workdir, "kill")
    os.makedirs(work, exist_ok=True)
    suite_args, label = suite_options(cfg, work, 6)
    points = cfg.kill_points or (3 if cfg.quick else 20)
    problems: list[str] = []
    ref = os.path.join(work, "reference.sqlite")
    code, _, err = finish(cli(cfg, ["run", "--run-id", "ref", "--ledger", ref, *suite_args], work))
    if code != 0:
        return Row(
            "kill sweep",
            f"an uninterrupted run of {label}",
            "the reference run failed",
            False,
            problems=[err.strip()[-500:]],
        )
    with reader(ref) as led:
        ref_events = list(led.events("ref"))
    want = metrics(ref_events)
    total = len(units_of(ref_events).planned)
    targets = [i * total // points for i in range(points)]
    ledger, run_id = os.path.join(work, "swept.sqlite"), "swept"
    kills = verified = 0
    sealed = False
    for target in targets:
        done_before = 0
        if os.path.exists(ledger):
            with reader(ledger) as led:
                done_before = sum(units_of(list(led.events(run_id))).finished.values())
            args = ["run", "--resume", run_id, "--ledger", ledger]
        else:
            args = ["run", "--run-id", run_id, "--ledger", ledger, *suite_args]
        proc = cli(cfg, args, work)
        killed = False
        assert proc.stdout is not None
        for line in proc.stdout:
            m = UNIT_LINE.match(line)
            here = done_before + (int(m.group(1)) if m else 0)
            if (line.startswith("running ") and target <= done_before) or (m and here >= target):
                proc.send_signal(signal.SIGKILL)
                killed = True
                break
        code, _, err = finish(proc)
        if not killed:  # it finished before this point: nothing left to interrupt
            sealed = code == 0
            if code != 0:
                problems.append(f"segment before kill point {target} exited {code}: {err[-300:]}")
            break
        kills += 1
        _, why = verify_run(ledger, run_id, sealed=False)
        if why:
            problems.append(f"after kill {kills}: {why}")
        else:
            verified += 1
    if not sealed:
        code, _, err = finish(cli(cfg, ["run", "--resume", run_id, "--ledger", ledger], work))
        if code != 0:
            problems.append(f"the final resume exited {code}: {err.strip()[-300:]}")
    run, why = verify_run(ledger, run_id, sealed=True)
    units = units_of(run.events) if run else Units([], collections.Counter(), 0, {})
    if why:
        problems.append(f"the final run does not verify: {why}")
    problems += units.exactly_once()
    got = metrics(run.events) if run else {}
    differ = sorted(k for k in want if got.get(k) != want[k])
    if differ:
        problems.append(f"metrics differ from the uninterrupted run's: {', '.join(differ)}")
    return Row(
        "kill sweep",
        f"SIGKILL at {kills} points spread over a {total}-unit run of {label} (units finished "
        f"at each kill: {', '.join(map(str, targets[:kills]))}), resumed after each",
        f"{verified}/{kills} interrupted ledgers verified; sealed; "
        f"{sum(units.finished.values())}/{total} units finished exactly once "
        f"({units.abandoned} interrupted units re-run); metrics "
        + ("equal the uninterrupted run's" if not differ else "DIFFER"),
        not problems,
        problems=problems,
    )
