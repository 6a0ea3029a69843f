"""``platform serve``: refplatform in the foreground; the serving itself is refplatform's.
``platform reset`` empties a served refplatform; ``platform check SPEC`` runs the probe
(harness/probe.py) on any platform alone and prints what works."""

from __future__ import annotations

import argparse
import asyncio

from benchledger.cli.common import CommandFailed, UsageError
from benchledger.ledger.inert import inert
from benchledger.refplatform.__main__ import add_serve_options, serve
from benchledger.refplatform.errors import PlatformError


def cmd_platform_serve(args: argparse.Namespace) -> int:
    """Serve refplatform until Ctrl-C; the admin key defaults to $BENCHLEDGER_ADMIN_KEY."""
    try:
        return serve(
            host=args.host,
            port=args.port,
            db=args.db,
            pool=args.pool,
            admin_key=args.admin_key or args.settings.admin_key or None,
            pool_base=args.pool_base,
            embedder_spec=args.embedder,
            pack_path=args.pack,
        )
    except PlatformError as exc:
        raise UsageError(exc.message) from None


RESET_PATH = "/api/v1/admin/reset"  # refplatform's own admin route (docs/refplatform.md)


def cmd_platform_reset(args: argparse.Namespace) -> int:
    """Reset the refplatform at URL to a fresh server's state (the admin key's right); one
    line saying how many memory records it removed. Exit 2 when it cannot."""
    import httpx2

    from benchledger.harness.platforms.builtin import external_url

    try:
        url = external_url(args.url)
    except ValueError as exc:
        raise UsageError(f"platform reset: {exc}") from None
    key = args.admin_key or args.settings.admin_key
    if not key:
        raise UsageError(
            "platform reset needs the admin key: --admin-key or $BENCHLEDGER_ADMIN_KEY"
        )
    try:
        answer = httpx2.post(url + RESET_PATH, headers={"X-API-Key": key}, timeout=60.0)
    except httpx2.HTTPError as exc:
        raise UsageError(f"platform reset {url}: cannot reach it ({type(exc).__name__})") from None
    if answer.status_code in (401, 403):
        raise UsageError(f"platform reset {url}: HTTP {answer.status_code}, the key was refused "
                         "(only the admin key may reset)")  # fmt: skip
    if answer.status_code == 404:
        raise UsageError(f"platform reset {url}: HTTP 404, no reset route: it is not "
                         "refplatform (reset another platform with its own tools)")  # fmt: skip
    try:
        removed = int(answer.json()["records_removed"])
    except (ValueError, KeyError, TypeError):
        raise UsageError(f"platform reset {url}: HTTP {answer.status_code} without a reset "
                         "answer") from None  # fmt: skip
    print(f"platform {url} reset: {removed} memory records removed; seeded again from its pack")
    return 0


async def _check(args: argparse.Namespace) -> tuple[str, list[str], str]:
    """(what the platform says it is, the probe's lines, why it is refused or "")."""
    from benchledger.harness.errors import HarnessError
    from benchledger.harness.platforms.platform import resolve
    from benchledger.harness.platforms.provision import provisioner
    from benchledger.harness.probe import probe

    try:
        _, spec = resolve(args.spec)
        prov = provisioner(spec, pool_size=2, admin_key=args.admin_key or args.settings.admin_key,
                           pool_base=args.pool_base or "", settings=args.settings)  # fmt: skip
        async with prov.runtime() as client:
            described = await client.describe()
            found = await probe(client, spec.label, sinks=described.sinks)
    except (ValueError, HarnessError) as exc:
        raise UsageError(f"platform check {inert(args.spec)}: {exc}") from None
    return f"{described.name} {described.version}", found.lines(), found.refused


def cmd_platform_check(args: argparse.Namespace) -> int:
    """Probe the platform ``SPEC`` names (as ``run --platform`` takes it) on a runtime of
    its own and print each finding; exit 1 when a run on it would be refused."""
    said, lines, refused = asyncio.run(_check(args))
    print(f"platform {inert(args.spec)}: {inert(said)}")
    for line in lines:
        print(f"  {line}")
    if refused:
        raise CommandFailed(f"a run on it would be refused: {inert(refused)}")
    print("usable: its memory is written and found again by its own words")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``platform serve``, ``platform reset`` and ``platform check``."""
    group = sub.add_parser("platform", help="the embedded reference memory platform")
    psub = group.add_subparsers(dest="platform", required=True, metavar="ACTION")
    p = psub.add_parser("serve", help="serve refplatform in the foreground")
    add_serve_options(p, admin_key_help="default: $BENCHLEDGER_ADMIN_KEY or random")
    p.set_defaults(func=cmd_platform_serve)
    r = psub.add_parser(
        "reset",
        help="empty a served refplatform (memories, changesets, pages, sessions) and seed it "
        "again from its pack, so another run starts as on a fresh server",
    )
    r.add_argument("url", metavar="URL", help="the platform's URL, as `platform serve` printed it")
    r.add_argument("--admin-key", metavar="KEY", help="default: $BENCHLEDGER_ADMIN_KEY")
    c = psub.add_parser(
        "check",
        help="probe a platform alone (as `run --platform SPEC` names it): write a known "
        "memory in its vocabulary, search for it by its own words, itemise the hits; print "
        "what works (exit 1: a run on it would be refused)",
    )
    c.add_argument("spec", metavar="SPEC", help="a --platform value: embedded, mcp:FILE, ...")
    c.add_argument("--admin-key", metavar="KEY", help="default: $BENCHLEDGER_ADMIN_KEY")
    c.add_argument("--pool-base", metavar="KEY", help="the pool keys' base (a URL platform)")
    c.set_defaults(func=cmd_platform_check)
    r.set_defaults(func=cmd_platform_reset)
