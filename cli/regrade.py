"""``benchledger regrade RUN --judge SPEC``: a sealed run re-judging RUN's recorded answers,
of a locomo or longmemeval run, with no platform or agent call (harness/regrade.py;
docs/locomo.md, "Re-judging a run");
``benchledger judge calibrate --judge SPEC``: the judge's false accepts and rejects on the
shipped calibration set, as a sealed run (docs/locomo.md, "Calibrating a judge")."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import secrets

from benchledger.cli.common import EXIT_OK, UsageError, ledger_arg, open_ledger, whole
from benchledger.cli.run_options import judge_options
from benchledger.harness.judge import JudgeRefused, make_judge
from benchledger.harness.record import RunRefused
from benchledger.harness.regrade import default_prompt, regrade
from benchledger.ledger.ledger import check_run_id
from benchledger.ledger.verified import open_run
from benchledger.protocols.judges import SHIPPED


def _run_id(source: str) -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    return f"rg-{stamp}-{secrets.token_hex(2)}"


def cmd_regrade(args: argparse.Namespace) -> int:
    """Re-judge a sealed locomo or longmemeval run's answers as a new sealed run; print its
    id and root."""
    if not args.judge:
        raise UsageError("regrade needs a judge: --judge SPEC (fake, openai:MODEL@URL, ...)")
    prompt = args.judge_prompt or ""
    run_id = args.run_id or _run_id(args.run)
    try:
        check_run_id(run_id)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    ledger = open_ledger(args, create=False, read_only=False)
    try:
        if ledger.store.head(run_id) is not None:
            raise RunRefused(f"run {run_id} already exists; give another --run-id")
        source = open_run(args.run, ledger, require_seal=True, allow_partial=False)
        try:
            judge = make_judge(
                args.judge,
                prompt=prompt if prompt in SHIPPED else "",
                prompt_path="" if prompt in SHIPPED else prompt,
                samples=args.judge_samples,
                temperature=args.judge_temperature,
                seed=args.judge_seed,
                settings=args.settings,
                default_prompt=default_prompt(source),  # the source suite's
            )
        except JudgeRefused as exc:
            raise UsageError(str(exc)) from None
        root = asyncio.run(regrade(ledger, source, judge, run_id, concurrency=args.concurrency))
    finally:
        ledger.store.close()
    print(f"run {run_id} sealed, root {root}: run {args.run}'s answers judged by {args.judge}")
    print(f"compare with: benchledger compare {args.run} {run_id}")
    return EXIT_OK


def cmd_judge_calibrate(args: argparse.Namespace) -> int:
    """Run the calibration set with its planted answers, judged; print the card's rates."""
    from benchledger.harness.driver import RunDriver
    from benchledger.harness.record import RunConfig
    from benchledger.protocols.locomo_calibration import CALIBRATION
    from benchledger.scoring import report

    if not args.judge:
        raise UsageError("judge calibrate needs a judge: --judge SPEC")
    run_id = args.run_id or _run_id("").replace("rg-", "jc-", 1)
    cfg = RunConfig(
        suite="locomo", agent="calibration", protocols_path=CALIBRATION, run_id=run_id,
        concurrency=args.concurrency, settings=args.settings,
    )  # fmt: skip
    cfg.judge = args.judge
    prompt = args.judge_prompt or ""
    cfg.judge_prompt = prompt if prompt in SHIPPED else ""
    cfg.judge_prompt_path = "" if prompt in SHIPPED else prompt
    cfg.judge_samples = args.judge_samples
    cfg.judge_temperature = args.judge_temperature
    cfg.judge_seed = args.judge_seed
    ledger = open_ledger(args, create=True, read_only=False)
    try:
        result = asyncio.run(RunDriver(ledger, cfg).execute())
    finally:
        ledger.store.close()
    # The card's own words (the suite's JSON), reached through its registration.
    card = json.loads(report(run_id, ledger=args.ledger, settings=args.settings).render("json"))
    print(f"judge {args.judge}: {card.get('calibration') or 'nothing judged'}")
    print(f"run {run_id} sealed, root {result.root}")
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``regrade`` and ``judge calibrate``."""
    j = sub.add_parser(
        "judge", help="a judge's false accepts and rejects on a calibration set (judge calibrate)"
    )
    jsub = j.add_subparsers(dest="judge_command", required=True, metavar="calibrate")
    c = jsub.add_parser("calibrate", help="run the judge on the shipped calibration set")
    c.add_argument("--run-id", metavar="ID", help="the run's id (default: a fresh jc-...)")
    c.add_argument("--concurrency", type=whole("--concurrency"), default=4, metavar="N",
                   help="questions at once (4)")  # fmt: skip
    judge_options(c)
    ledger_arg(c)
    c.set_defaults(func=cmd_judge_calibrate)
    p = sub.add_parser(
        "regrade",
        help="judge a run's recorded answers again, as a new run (no platform or agent call)",
    )
    p.add_argument("run", metavar="RUN", help="the sealed run whose answers are judged again")
    p.add_argument("--run-id", metavar="ID", help="the new run's id (default: a fresh rg-...)")
    p.add_argument("--concurrency", type=whole("--concurrency"), default=4, metavar="N",
                   help="answers judged at once (4)")  # fmt: skip
    judge_options(p)
    ledger_arg(p)
    p.set_defaults(func=cmd_regrade)
