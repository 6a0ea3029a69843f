"""``platform serve``: refplatform in the foreground; the serving itself is refplatform's."""

from __future__ import annotations

import argparse

from benchledger.cli.common import UsageError
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


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``platform serve``."""
    group = sub.add_parser("platform", help="the embedded reference memory platform")
    psub = group.add_subparsers(dest="platform", required=True, metavar="ACTION")
    p = psub.add_parser("serve", help="serve refplatform in the foreground")
    add_serve_options(p, admin_key_help="default: $BENCHLEDGER_ADMIN_KEY or random")
    p.set_defaults(func=cmd_platform_serve)
