"""``run``'s options, and a queue worker's (``worker``: those it may give again): the
installed suites' item options, each installed platform's own options, the run's."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from benchledger.cli.common import number, whole
from benchledger.cli.gate import gate_bar_args
from benchledger.cli.keys import sign_key_arg
from benchledger.projections import suites as read_suites
from benchledger.projections.suites import ItemOption

if TYPE_CHECKING:
    from benchledger.harness.record import RunConfig


def item_options() -> list[ItemOption]:
    """The installed suites' item options, each flag once (suites may share one)."""
    found = {p.items.flag: p.items for p in read_suites.installed() if p.items is not None}
    return list(found.values())


def _platform_args(p: argparse.ArgumentParser) -> None:
    """Each installed platform's own options (``Platform.options``), in a group per platform."""
    from benchledger.harness.platforms.platform import every

    seen: set[str] = set()
    for platform in every():
        mine = [o for o in platform.options if o.flag not in seen]
        if not mine:
            continue
        g = p.add_argument_group(f"platform {platform.name}")
        for o in mine:
            seen.add(o.flag)
            kind = whole(o.flag) if o.whole else str
            g.add_argument(o.flag, dest=o.dest, metavar=o.metavar, type=kind, help=o.help)


def run_options(p: argparse.ArgumentParser, *, worker: bool = False) -> None:
    """``run``'s options; a queue worker's (``worker``) are those it may give again, each
    checked against the record of every run it works (the rest come from the record)."""
    if worker:
        p.set_defaults(suite=read_suites.DEFAULT_SUITE, k=None, run_id=None, shard=None,
                       protocol=None, limit=None, resume=None, retry_infra=False,
                       seal_despite_infra=False, platform_scope=None, gate_baseline=None,
                       prereg=None, tolerance=None, gate_metrics=None, sign_key=None,
                       queue=False, wait=False)  # fmt: skip
    else:
        installed = read_suites.installed()  # benchledger's own and every installed plugin's
        p.add_argument(
            "--suite",
            default=read_suites.DEFAULT_SUITE,  # an unknown one: one line naming them (the plan)
            help="; ".join(f"{s.name}: {s.summary}" if s.summary else s.name for s in installed)
            + " (`benchledger suites` lists them)",
        )
    for option in item_options():  # each suite's own, e.g. --protocols, --cases, --tasks
        p.add_argument(option.flag, metavar=option.metavar, help=option.help)
    # A worker's --agent and --platform are what its operator lets it run (repeatable).
    many: dict[str, Any] = {"action": "append"} if worker else {}
    p.add_argument(
        "--agent",
        **many,
        help="scripted (default), fake[:DELAY_S], anthropic:MODEL (key: $ANTHROPIC_API_KEY), "
        "openai:MODEL@BASE_URL (key, if the server needs one: $OPENAI_API_KEY) or "
        "recorded:RUN_DIR (re-enacts a recorded peer run, e.g. "
        "../shared/peers/mcp-data-platform/bench/results/s5-anthropic-k5); LoCoMo's "
        "controls no-memory[:SPEC] and full-context:SPEC; or NAME[:MODEL] "
        "of another installed model provider (`benchledger models` lists them)",
    )
    m = p.add_argument_group("model agents")
    m.add_argument(
        "--base-url",
        metavar="URL",
        help="the model server: anthropic (default $ANTHROPIC_BASE_URL, else the API's own); "
        "openai, when the spec has no @BASE_URL",
    )
    m.add_argument(
        "--rpm", type=whole("--rpm"), metavar="N", help="at most N model requests per minute"
    )
    m.add_argument(
        "--tpm", type=whole("--tpm"), metavar="N", help="at most N model tokens per minute"
    )
    m.add_argument(
        "--max-tokens",
        type=whole("--max-tokens"),
        metavar="N",
        help="reply token limit (anthropic default 4096)",
    )
    m.add_argument("--temperature", type=number("--temperature"), metavar="F")
    judge_options(p)
    m.add_argument("--top-p", type=number("--top-p", at_most=1), metavar="F")
    m.add_argument("--top-k", type=whole("--top-k"), metavar="N")
    m.add_argument(
        "--time-scale",
        type=number("--time-scale"),
        metavar="F",
        help="recorded agents: spend the recorded latencies times F (1.0; 0 = no waiting)",
    )
    p.add_argument(
        "--platform",
        **many,
        metavar="embedded|embedded:process|server-memory[@VERSION]|basic-memory[@VERSION]|URL",
        help="embedded (default: in this process), embedded:process (a child process), "
        "server-memory (@modelcontextprotocol/server-memory over stdio, npm-installed on "
        "first use; default version 2026.8.31), basic-memory (PyPI basic-memory over "
        "streamable HTTP, pip-installed on first use; default 0.24.1) or the URL of a running "
        "mcp-data-platform; or an installed platform's name (`benchledger platforms`)",
    )
    if not worker:
        p.add_argument(
            "--platform-scope",
            choices=["pass", "unit"],
            help="embedded: a fresh platform per pass (default) or per unit",
        )
    _platform_args(p)
    p.add_argument("--concurrency", type=whole("--concurrency"), help="units in flight (4)")
    p.add_argument(
        "--debug",
        action="store_true",
        help="print each harness failure's traceback as it is written to the run's failure "
        "log (.benchledger/logs/RUN_ID.log, or $BENCHLEDGER_LOG_DIR; never the ledger)",
    )
    if worker:
        return
    p.add_argument("--k", type=whole("--k"), help="passes; each is one attempt per protocol (1)")
    p.add_argument("--run-id", metavar="ID")
    p.add_argument(
        "--queue",
        action="store_true",
        help="write the run's header and queue its units as jobs in the PostgreSQL ledger's "
        "database, for `benchledger worker` processes on any machines; then return "
        "(docs/scaling.md)",
    )
    p.add_argument(
        "--wait",
        action="store_true",
        help="with --queue: report the jobs' progress until none is left, then the card",
    )
    p.add_argument(
        "--shard",
        metavar="i/n",
        help="retired (refused, exit 2): queue the run with --queue and start `benchledger "
        "worker` processes (docs/scaling.md)",
    )
    p.add_argument(
        "--protocol",
        action="append",
        metavar="ID",
        help="run only this protocol (provenance: case) of the set; repeatable. The run is "
        "recorded and labelled as a subset, and the gate will not compare it with a full run",
    )
    p.add_argument(
        "--limit",
        type=whole("--limit"),
        metavar="N",
        help="run only the first N protocols (or cases) of those selected",
    )
    lm = p.add_argument_group("locomo (docs/locomo.md)")
    lm.add_argument(
        "--search-k",
        type=whole("--search-k"),
        metavar="N",
        help="hits the harness's search asks the platform for on each question (10; recorded)",
    )
    lm.add_argument(
        "--context-budget",
        type=whole("--context-budget"),
        metavar="TOKENS",
        help="--agent full-context:SPEC: the conversation shown is cut to this many estimated "
        "tokens, its earliest turns first (100000; recorded)",
    )
    p.add_argument(
        "--resume", metavar="RUN_ID", help="finish an interrupted (or otherwise unsealed) run"
    )
    p.add_argument(
        "--retry-infra",
        action="store_true",
        help="with --resume: also re-run the units whose every attempt ended in an "
        "infrastructure error, as new attempts (the failed ones stay in the log)",
    )
    p.add_argument(
        "--seal-despite-infra",
        action="store_true",
        help="seal the run even when units ended in infrastructure errors (they then count "
        "as harness failures for good); without it such a run is left unsealed, to be "
        "retried with --resume RUN_ID --retry-infra or sealed with `benchledger seal`",
    )
    sign_key_arg(p)
    g = p.add_argument_group("pre-registered gate (recorded in run_started before any unit runs)")
    g.add_argument("--gate-baseline", metavar="RUN", help="the sealed baseline run (id or bundle)")
    gate_bar_args(g)
    g.add_argument("--prereg", metavar="FILE", help="a file from `benchledger prereg new`")


__all__ = ["item_options", "run_options"]


def judge_options(p: argparse.ArgumentParser) -> None:
    """``--judge`` and its settings (``run`` and ``regrade``; docs/locomo.md, "The judge")."""
    j = p.add_argument_group("judge (locomo, longmemeval)")
    j.add_argument("--judge", metavar="SPEC",
                   help="grade each answer with a model judge too, named as --agent names a "
                   "model: fake[:DELAY_S], openai:MODEL@BASE_URL, anthropic:MODEL; every "
                   "judgment is a recorded model call (J beside F1, judge_accuracy beside "
                   "the judge-free bounds)")  # fmt: skip
    j.add_argument("--judge-prompt", metavar="NAME|FILE",
                   help="the judge's prompt: lenient (locomo's default: LoCoMo's J as vendors "
                   "run it), strict, longmemeval (longmemeval's default: evaluate_qa.py's "
                   "prompt for each question's type), or a file holding {question}, {gold} "
                   "and {answer}")  # fmt: skip
    j.add_argument(
        "--judge-samples",
        type=whole("--judge-samples"),
        default=1,
        metavar="N",
        help="ask the judge N times per answer (agreement and flip rate)",
    )
    j.add_argument(
        "--judge-temperature",
        type=number("--judge-temperature"),
        default=0.0,
        metavar="F",
        help="the judge's sampling temperature (0)",
    )
    j.add_argument(
        "--judge-seed",
        type=whole("--judge-seed", at_least=0),
        metavar="N",
        help="the judge's seed (sample i asks with N + i); none by default",
    )


def judge_config(cfg: RunConfig, args: argparse.Namespace) -> None:
    """The judge options on ``cfg``: a shipped prompt by name, anything else as a file."""
    from benchledger.protocols.judges import SHIPPED

    prompt = args.judge_prompt or ""
    cfg.judge = args.judge or ""
    cfg.judge_prompt = prompt if prompt in SHIPPED else ""
    cfg.judge_prompt_path = "" if prompt in SHIPPED else prompt
    cfg.judge_samples = args.judge_samples
    cfg.judge_temperature = args.judge_temperature
    cfg.judge_seed = args.judge_seed
