"""Key files for signed seals: make a key pair, read a private key, read trusted public keys.

- private key ``benchledger.key``: PKCS#8 PEM (``-----BEGIN PRIVATE KEY-----``), mode 0600;
  refused when other users may read it, as ssh refuses such a key;
- public key ``benchledger.pub``: one line ``ed25519:<64 hex digits>`` (a comment may
  follow after a space). A trusted-keys file holds one such line per key (``#`` starts
  a comment); PEM public keys (``-----BEGIN PUBLIC KEY-----``) are read too.

Errors are ``UnusableInput`` naming the file and never quoting its content.
"""

from __future__ import annotations

import os
import stat

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    load_pem_private_key,
    load_pem_public_key,
)

from benchledger.ledger.errors import UnusableInput
from benchledger.ledger.signing import fingerprint, public_bytes

KEY_FILE = "benchledger.key"
PUB_FILE = "benchledger.pub"
PUB_PREFIX = "ed25519:"
_MAX_KEY_FILE = 64 * 1024


def public_line(raw: bytes) -> str:
    """The text form of a public key: ``ed25519:<hex>``."""
    return PUB_PREFIX + raw.hex()


def write_key_pair(directory: str) -> tuple[str, str, str]:
    """Make an Ed25519 key pair in ``directory``; return (key path, pub path, fingerprint).

    Refuses to overwrite either file; on any failure nothing is left behind.
    """
    if not os.path.isdir(directory):
        raise UnusableInput(directory, "no such directory; create it first")
    key_path = os.path.join(directory, KEY_FILE)
    pub_path = os.path.join(directory, PUB_FILE)
    for path in (key_path, pub_path):
        if os.path.lexists(path):
            raise UnusableInput(path, "already exists; refusing to overwrite a key (pick --out)")
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    raw = public_bytes(private.public_key())
    written: list[str] = []
    try:
        for path, data, mode in (
            (key_path, pem, 0o600),
            (pub_path, (public_line(raw) + "\n").encode(), 0o644),
        ):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            written.append(path)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(path, mode)  # the umask may have narrowed it; the key must be 0600
    except OSError as exc:
        for path in written:
            os.unlink(path)
        raise UnusableInput(directory, f"cannot write the key pair ({exc.strerror})") from None
    return key_path, pub_path, fingerprint(raw)


def _read(path: str, what: str) -> bytes:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UnusableInput(path, f"no such {what} file") from None
    except OSError as exc:
        raise UnusableInput(path, f"cannot read the {what} file ({exc.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise UnusableInput(path, f"not a regular file; expected a {what} file")
    if st.st_size > _MAX_KEY_FILE:
        raise UnusableInput(path, f"{st.st_size} bytes is too large for a {what} file")
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise UnusableInput(path, f"cannot read the {what} file ({exc.strerror})") from None


def load_private_key(path: str) -> Ed25519PrivateKey:
    """The Ed25519 private key in ``path``; UnusableInput (never quoting it) otherwise."""
    data = _read(path, "private key")
    if PUB_PREFIX.encode() in data[:16] or b"PUBLIC KEY" in data:
        raise UnusableInput(path, "this is a public key; signing needs the private key file")
    mode = stat.S_IMODE(os.stat(path).st_mode)
    if mode & 0o077:
        raise UnusableInput(
            path,
            f"mode {mode:04o} lets other users read this private key; run `chmod 600 {path}`",
        )
    try:
        key = load_pem_private_key(data, password=None)
    except TypeError:
        raise UnusableInput(
            path, "the private key is encrypted; benchledger needs it unencrypted"
        ) from None
    except (ValueError, UnsupportedAlgorithm):
        raise UnusableInput(
            path, "not a PEM private key (make one with `benchledger keys new`)"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise UnusableInput(path, f"a {type(key).__name__}, not an Ed25519 private key")
    return key


def parse_public_keys(text: str, where: str) -> list[bytes]:
    """Every public key (raw 32 bytes) in a public-key or trusted-keys file's text."""
    keys: list[bytes] = []
    if "PRIVATE KEY" in text:
        raise UnusableInput(where, "this is a private key; pass the public key (.pub) instead")
    for block in _pem_blocks(text):
        try:
            key = load_pem_public_key(block.encode())
        except ValueError:
            raise UnusableInput(where, "a PEM block is not a public key") from None
        if not isinstance(key, Ed25519PublicKey):
            raise UnusableInput(where, f"a {type(key).__name__}, not an Ed25519 public key")
        keys.append(public_bytes(key))
    in_pem = False
    for lineno, line in enumerate(text.splitlines(), start=1):
        word = line.split("#", 1)[0].strip().split(" ", 1)[0] if line.strip() else ""
        if "-----BEGIN" in line:
            in_pem = True
        if in_pem or not word:
            in_pem = in_pem and "-----END" not in line
            continue
        hex_part = word[len(PUB_PREFIX) :] if word.startswith(PUB_PREFIX) else ""
        try:
            raw = bytes.fromhex(hex_part)
        except ValueError:
            raw = b""
        if len(raw) != 32:
            raise UnusableInput(
                where, "not a public key: want `ed25519:` and 64 hex digits", line=lineno
            )
        keys.append(raw)
    if not keys:
        raise UnusableInput(where, "holds no public key")
    return keys


def _pem_blocks(text: str) -> list[str]:
    out, cur = [], []
    for line in text.splitlines():
        if line.startswith("-----BEGIN"):
            cur = [line]
        elif cur:
            cur.append(line)
            if line.startswith("-----END"):
                out.append("\n".join(cur) + "\n")
                cur = []
    return out


def load_public_keys(paths: list[str]) -> list[bytes]:
    """The raw public keys in every file of ``paths`` (a .pub file or a trusted-keys file)."""
    keys: list[bytes] = []
    for path in paths:
        data = _read(path, "public key")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise UnusableInput(path, "not a text file of public keys") from None
        keys.extend(parse_public_keys(text, path))
    return keys
