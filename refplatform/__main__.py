"""``python -m benchledger.refplatform serve``: the reference platform as a foreground server.

The first stdout line is ``refplatform serving http://HOST:PORT/mcp (admin REST under
http://HOST:PORT/api/v1)``, flushed at once: launchers of a child process read the URL
from it. Further lines give the keys and the ``benchledger run --platform ...`` line that
reaches this server. Unusable options (a port out of range or in use among them) print one
line on stderr and exit 2, before anything listens or any URL is printed.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from benchledger.refplatform.auth import MAX_POOL
from benchledger.refplatform.errors import PlatformError

if TYPE_CHECKING:  # imported at serve time: --help and option errors stay fast
    from benchledger.refplatform.server import RunningPlatform

EXIT_OK, EXIT_UNUSABLE, EXIT_INTERRUPTED = 0, 2, 130
# Pool identities served by default: the committed suite at k=1 needs 66 (30 protocols x 2,
# plus a retry margin); this leaves room for a larger set (tests/test_refplatform_main.py).
DEFAULT_POOL = 128


def add_serve_options(
    p: argparse.ArgumentParser, *, admin_key_help: str = "default: random"
) -> None:
    """Add ``serve``'s options to ``p`` (shared with ``benchledger platform serve``)."""
    p.add_argument("--host", default="127.0.0.1", help="default: loopback only")
    p.add_argument("--port", type=int, default=8098, help="0 picks a free port")
    p.add_argument("--db", metavar="PATH", help="SQLite state file (default: in memory)")
    p.add_argument(
        "--pool",
        type=int,
        default=DEFAULT_POOL,
        metavar="N",
        help=f"pool identities ({DEFAULT_POOL})",
    )
    p.add_argument("--admin-key", metavar="K", help=admin_key_help)
    p.add_argument("--pool-base", metavar="B", help="pool keys are B-001..B-N (default random)")
    p.add_argument("--embedder", default="lexical", metavar="lexical|wordllama|ollama:MODEL@URL")
    p.add_argument(
        "--pack",
        metavar="PATH",
        help="seed pack folder in the peer's seed layout (default: benchledger's own pack)",
    )


def serve(
    *,
    host: str = "127.0.0.1",
    port: int = 8098,
    db: str | None = None,
    pool: int = DEFAULT_POOL,
    admin_key: str | None = None,
    pool_base: str | None = None,
    embedder_spec: str = "lexical",
    pack_path: str | None = None,
) -> int:
    """Serve until Ctrl-C, then return 0; unusable input raises PlatformError before listening."""
    # Imported here so that ``--help`` and option errors do not load uvicorn and the MCP SDK.
    from benchledger.refplatform.embedder import parse_spec
    from benchledger.refplatform.packs import default_pack, load_pack
    from benchledger.refplatform.platform import Platform
    from benchledger.refplatform.server import RunningPlatform

    if not 1 <= pool <= MAX_POOL:
        raise PlatformError(f"--pool must be 1..{MAX_POOL}")
    if not 0 <= port <= 65535:  # the socket layer would raise OverflowError, not OSError
        raise PlatformError(f"--port must be 0..65535 (0 picks a free port), not {port}")
    try:
        embedder = parse_spec(embedder_spec)
    except ValueError as exc:
        raise PlatformError(f"--embedder: {exc}") from None
    try:
        if db:
            os.makedirs(os.path.dirname(os.path.abspath(db)), exist_ok=True)
    except OSError as exc:
        raise PlatformError(f"--db {db}: {exc.strerror}") from None
    try:
        pack = load_pack(pack_path) if pack_path else default_pack()
    except PlatformError as exc:
        raise PlatformError(f"--pack {pack_path or 'default'}: {exc.message}") from None
    platform = Platform(db or ":memory:", pack=pack, embedder=embedder)
    try:
        platform.ready()  # never print a URL that serves nothing
        running = RunningPlatform(
            platform,
            pool_size=pool,
            admin_key=admin_key or None,
            pool_base=pool_base,
            host=host,
            port=port,
            background=False,
        )
    except BaseException:
        platform.close()
        raise
    try:
        print(
            f"refplatform serving {running.mcp_url} (admin REST under {running.url}/api/v1)",
            flush=True,
        )
        print(f"  admin key: {running.admin_key}")
        print(
            f"  pool keys: {running.key(1)} .. {running.key(pool)} "
            f"(bench-agent-001..{pool:03d}@apikey.local)"
        )
        print(f"  state:     {db or 'in memory (pass --db PATH to keep it)'}")
        print(f"  pack:      {pack.path} ({pack.pack_hash[:12]})")
        print(f"  embedder:  {embedder.name}")
        print("benchledger runs against it with:")
        print(f"  {run_line(running)}")
        print("Ctrl-C stops it.", flush=True)
        running.server.serve_forever()
    except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it handled: a normal stop
        pass
    finally:
        platform.close()
    print("refplatform stopped", flush=True)
    return EXIT_OK


def run_line(running: RunningPlatform) -> str:
    """The ``benchledger run`` command line that reaches ``running`` with its own keys."""
    words = ["--platform", running.url, "--admin-key", running.admin_key,
             "--pool-base", running.pool_base, "--pool-size", str(running.pool_size)]  # fmt: skip
    return "benchledger run " + " ".join(shlex.quote(w) for w in words)


def build_parser() -> argparse.ArgumentParser:
    """The standalone argument parser: one command, ``serve``."""
    parser = argparse.ArgumentParser(
        prog="python -m benchledger.refplatform",
        description="The reference agent-memory platform (MCP + admin REST).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_serve_options(sub.add_parser("serve", help="serve refplatform in the foreground"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: serve, or print one line and exit 2 on unusable options."""
    args = build_parser().parse_args(argv)
    try:
        return serve(
            host=args.host,
            port=args.port,
            db=args.db,
            pool=args.pool,
            admin_key=args.admin_key,
            pool_base=args.pool_base,
            embedder_spec=args.embedder,
            pack_path=args.pack,
        )
    except PlatformError as exc:
        print(f"refplatform: error: {exc.message}", file=sys.stderr)
        return EXIT_UNUSABLE
    except KeyboardInterrupt:  # Ctrl-C while starting, before uvicorn handles it
        print("refplatform: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
