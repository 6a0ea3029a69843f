"""Signing keys: ``keys new|show``, ``--sign-key``, and the signer a seal is signed with.

Loaded only by the commands that make, show or sign with a key (``keys``, ``seal``,
``run``): key files need cryptography. The keys a reader trusts are cli/authenticity.py's.
"""

from __future__ import annotations

import argparse
import os
from importlib import metadata

from benchledger.cli.common import EXIT_OK, command_line
from benchledger.harness.settings import Settings
from benchledger.ledger import UnusableInput
from benchledger.ledger.keys import load_private_key, load_public_keys, public_line, write_key_pair
from benchledger.ledger.signing import Signer, fingerprint


def tool_version() -> str:
    """``benchledger X.Y.Z``, as recorded in run_started and in seal signatures."""
    try:
        return f"benchledger {metadata.version('benchledger')}"
    except metadata.PackageNotFoundError:
        return "benchledger"


def signer_from(path: str | None, settings: Settings) -> Signer | None:
    """The signer for ``--sign-key PATH`` (else the settings' $BENCHLEDGER_SIGNING_KEY);
    None if neither. A bad key file is UnusableInput: one line, exit 2, nothing written.
    """
    path = path or settings.signing_key
    if not path:
        return None
    return Signer(load_private_key(path), tool_version())


def sign_key_arg(p: argparse.ArgumentParser) -> None:
    """Add ``--sign-key PATH`` (default $BENCHLEDGER_SIGNING_KEY)."""
    p.add_argument(
        "--sign-key",
        metavar="PATH",
        help="sign the seal with this Ed25519 private key (or $BENCHLEDGER_SIGNING_KEY); "
        "the key itself is never recorded",
    )


def cmd_keys_new(args: argparse.Namespace) -> int:
    """Make an Ed25519 key pair: DIR/benchledger.key (0600) and DIR/benchledger.pub."""
    out = args.out or args.settings.key_dir
    if not os.path.isdir(out) and not os.path.lexists(out):
        # Made private (0700), as the default folder: it holds a private key.
        try:
            os.makedirs(out, mode=0o700)
        except OSError as exc:
            raise UnusableInput(out, f"cannot create the key folder ({exc.strerror})") from None
        print(f"created {out} (mode 0700)")
    key, pub, fp = write_key_pair(out)
    print(f"wrote {key} (private, mode 0600: keep it secret, never commit or publish it)")
    print(f"wrote {pub} (public: publish it beside your runs)")
    print(f"fingerprint {fp}")
    sign = command_line("benchledger", "run", "--sign-key", key)
    env = command_line(f"BENCHLEDGER_SIGNING_KEY={key}")
    print(f"sign:   {sign}   (or {env})")
    print(f"verify: {command_line('benchledger', 'verify', 'BUNDLE', '--pubkey', pub)}")
    return EXIT_OK


def cmd_keys_show(args: argparse.Namespace) -> int:
    """Print the fingerprint and public line of a .pub file (or of a private key's pair)."""
    try:
        keys = load_public_keys([args.file])
    except UnusableInput as exc:
        if "private key" not in exc.problem:
            raise
        signer = signer_from(args.file, args.settings)  # a private key file: show its public half
        assert signer is not None
        keys = [signer.public_key]
    for raw in keys:
        print(f"{fingerprint(raw)}  {public_line(raw)}")
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``keys new|show``."""
    p = sub.add_parser("keys", help="Ed25519 keys that sign run seals")
    keys = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    k = keys.add_parser("new", help="make DIR/benchledger.key (0600) and DIR/benchledger.pub")
    k.add_argument(
        "--out",
        metavar="DIR",
        help="where to write them (default: $BENCHLEDGER_KEY_DIR or ~/.config/benchledger)",
    )
    k.set_defaults(func=cmd_keys_new)
    k = keys.add_parser("show", help="a key file's fingerprint and public line")
    k.add_argument("file", metavar="FILE", help="a .pub, a trusted-keys file or a private key")
    k.set_defaults(func=cmd_keys_show)
