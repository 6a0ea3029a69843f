"""The one verified door (``open_run``): a bundle is read once; it shows what it checked.

A bundle served through a FIFO can change between two opens (so can one on a network
mount). Each file here is served by a writer thread: the n-th open reads the n-th content
the test chose. Reading once, the door (and ``verify``) either reports the one content it
read, or refuses it; it never authenticates one content and shows another.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from benchledger.cli import main
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.bundle import export_redacted, export_run
from benchledger.ledger.events import RunStartedBody, UnitFinishedBody, UnitStartedBody
from benchledger.ledger.keys import load_public_keys
from benchledger.ledger.redaction import Selection
from benchledger.ledger.signing import fingerprint
from benchledger.ledger.verified import TRUSTED, UNTRUSTED_KEY
from benchledger.projections.source import RunUnverified, from_bundle, open_run
from tests.conftest import keypair, signing_ledger
from tests.sample import build_run, counter_clock

OPENS = 8  # more opens than any reader of a bundle ever made


class Served:
    """A FIFO at ``path`` whose n-th open (from 1) reads ``content(n)``; ``None`` ends it.

    Once a reader has opened it, a fresh FIFO takes its name, so the next open is a pipe of
    its own: every open reads one whole content from its start.
    """

    def __init__(self, path: Path, content: Callable[[int], bytes | None]) -> None:
        self.path = str(path)
        self.content = content
        self.opens = 0
        self.done = False
        self.opening = threading.Event()  # set while the writer waits in open (or has ended)
        os.mkfifo(self.path)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            while (data := self.content(self.opens + 1)) is not None:
                self.opening.set()
                fd = os.open(self.path, os.O_WRONLY)  # blocks until a reader opens the FIFO
                self.opening.clear()
                try:
                    if self.done:
                        return
                    self.opens += 1
                    os.mkfifo(self.path + ".next")
                    os.replace(self.path + ".next", self.path)
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view) :]
                except BrokenPipeError:  # the reader stopped reading early (a refused header)
                    pass
                finally:
                    os.close(fd)
        finally:
            self.opening.set()

    def stop(self) -> None:
        """End the writer once it waits for the next reader: a read end opened lets it out."""
        self.done = True
        self.opening.wait()
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            self.thread.join()
        finally:
            os.close(fd)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, object]:
    """Run r1 signed by the publisher's key (genuine) and a forged r1 signed by another key,
    each as a full and a redacted bundle (model calls withheld), as bytes."""
    d = tmp_path_factory.mktemp("door")
    out: dict[str, object] = {}
    for who, seed in (("genuine", 7), ("forged", 8)):
        key, pub = keypair(d / who)
        store = open_store(str(d / f"{who}.sqlite"))
        ledger = signing_ledger(store, key)
        out[f"{who} root"] = build_run(ledger, "r1", units=3 if who == "genuine" else 4, seed=seed)
        full, red = d / f"{who}.jsonl", d / f"{who}-red.jsonl"
        export_run(ledger, "r1", str(full))
        export_redacted(ledger, "r1", str(red), Selection(frozenset({"model_call"})))
        store.close()
        out[f"{who} full"] = full.read_bytes()
        out[f"{who} redacted"] = red.read_bytes()
        out[f"{who} pub"] = pub
        out[f"{who} key"] = fingerprint(load_public_keys([pub])[0])
    return out


def _alone(runs: dict[str, object], name: str, tmp_path: Path) -> str:
    """The bundle ``name`` as an ordinary file (what a reader of it alone sees)."""
    path = tmp_path / f"{name.replace(' ', '-')}.jsonl"
    path.write_bytes(runs[name])  # type: ignore[arg-type]
    return str(path)


def _key(runs: dict[str, object], who: str) -> list[bytes]:
    return load_public_keys([str(runs[f"{who} pub"])])


# -- the bytes are read once ----------------------------------------------------------------


def _read_once(path: str, read: Callable[[], object]) -> list[object]:
    """``read()``'s result, run beside a FIFO at ``path`` that is written once: a second
    open would block, so it is let go (an empty file) and the result is left empty."""
    got: list[object] = []
    reader = threading.Thread(target=lambda: got.append(read()), daemon=True)
    reader.start()
    reader.join(timeout=30)  # a second open blocks: the writer wrote once and is gone
    if reader.is_alive():
        with open(path, "wb"):  # lets the blocked second open see an empty file
            pass
        reader.join()
        return []
    return got


@pytest.mark.parametrize("fmt", ["full", "redacted"])
def test_open_run_opens_a_bundle_file_exactly_once(runs, tmp_path, fmt):
    genuine = runs[f"genuine {fmt}"]
    served = Served(tmp_path / "once.jsonl", lambda n: genuine if n == 1 else None)
    key = _key(runs, "genuine")
    got = _read_once(
        served.path,
        lambda: open_run(served.path, require_seal=True, allow_partial=False, trusted=key),
    )
    assert served.opens == 1 and len(got) == 1, "open_run opened the bundle more than once"
    run = got[0]
    expected = from_bundle(_alone(runs, f"genuine {fmt}", tmp_path))
    assert run.events == expected.events and run.root == runs["genuine root"]  # type: ignore[attr-defined]
    assert run.standing.state == TRUSTED  # type: ignore[attr-defined]


def test_verify_reveal_reads_the_redacted_bundle_once(runs, tmp_path, capsys):
    redacted = runs["genuine redacted"]
    served = Served(tmp_path / "once.jsonl", lambda n: redacted if n == 1 else None)
    full = _alone(runs, "genuine full", tmp_path)
    pub = str(runs["genuine pub"])
    got = _read_once(served.path, lambda: main(["verify", served.path, "--reveal", full,
                                                  "--pubkey", pub]))  # fmt: skip
    out = capsys.readouterr().out
    assert got == [0], f"verify read the redacted bundle more than once:\n{out}"
    assert "revealed: all" in out and "authenticated: " in out


def test_import_reads_a_bundle_once_and_writes_what_it_verified(runs, tmp_path, capsys):
    genuine = runs["genuine full"]
    served = Served(tmp_path / "once.jsonl", lambda n: genuine if n == 1 else None)
    ledger = str(tmp_path / "l.sqlite")
    got = _read_once(served.path, lambda: main(["import", served.path, "--ledger", ledger]))
    out = capsys.readouterr()
    assert got == [0] and served.opens == 1, f"import read the bundle twice:\n{out}"
    with open_store(ledger, create=False) as store:
        written = b"".join(bytes(d) + b"\n" for _s, _q, _k, d in store.scan("r1"))
    assert written == genuine.split(b"\n", 1)[1]  # type: ignore[union-attr]


# -- a file that changes between opens ------------------------------------------------------


def _one_content(run, runs: dict[str, object], fmt: str, tmp_path: Path) -> str:
    """Which content ``run`` is, checking its events, root and seal all come from it."""
    for who in ("genuine", "forged"):
        if run.root == runs[f"{who} root"]:
            alone = from_bundle(_alone(runs, f"{who} {fmt}", tmp_path))
            assert run.events == alone.events, f"verified the {who} root, showed other events"
            assert run.standing.key == runs[f"{who} key"], "stood on another content's seal"
            return who
    raise AssertionError(f"root {run.root} is neither content's")


@pytest.mark.parametrize("fmt", ["full", "redacted"])
@pytest.mark.parametrize("forged_at", range(1, OPENS + 1), ids=lambda n: f"forged-on-open-{n}")
def test_open_run_of_a_bundle_that_changes_between_opens_shows_only_what_it_authenticated(
    runs, tmp_path, fmt, forged_at
):
    genuine, forged = runs[f"genuine {fmt}"], runs[f"forged {fmt}"]
    served = Served(
        tmp_path / "changing.jsonl",
        lambda n: (forged if n == forged_at else genuine) if n <= OPENS else None,
    )
    try:
        run = open_run(served.path, require_seal=True, allow_partial=False,
                       trusted=_key(runs, "genuine"))  # fmt: skip
    except RunUnverified:
        return  # refused: nothing shown
    finally:
        served.stop()
    who = _one_content(run, runs, fmt, tmp_path)
    assert run.standing.state == (TRUSTED if who == "genuine" else UNTRUSTED_KEY)


@pytest.mark.parametrize("forged_at", range(1, OPENS + 1), ids=lambda n: f"forged-on-open-{n}")
def test_verify_pubkey_of_a_bundle_that_changes_between_opens_never_authenticates_another_content(
    runs, tmp_path, capsys, forged_at
):
    genuine, forged = runs["genuine full"], runs["forged full"]
    served = Served(
        tmp_path / "changing.jsonl",
        lambda n: (forged if n == forged_at else genuine) if n <= OPENS else None,
    )
    pub = str(runs["genuine pub"])
    try:
        code = main(["verify", served.path, "--pubkey", pub])
    finally:
        served.stop()
    out = capsys.readouterr().out
    if not any(line.startswith("authenticated:") for line in out.splitlines()):
        assert code == 1  # refused
        return
    assert code == 0 and f"root {runs['genuine root']}" in out
    assert str(runs["forged root"]) not in out


# -- who vouches for the root ---------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["full", "redacted"])
def test_a_signed_bundle_stands_trusted_with_its_key_and_untrusted_with_another(
    runs, tmp_path, fmt
):
    path = _alone(runs, f"genuine {fmt}", tmp_path)
    own = open_run(path, require_seal=True, allow_partial=False, trusted=_key(runs, "genuine"))
    other = open_run(path, require_seal=True, allow_partial=False, trusted=_key(runs, "forged"))
    assert own.standing is not None and own.standing.state == TRUSTED
    assert own.standing.authenticated
    assert other.standing is not None and other.standing.state == UNTRUSTED_KEY
    assert not other.standing.authenticated
    assert own.standing.key == other.standing.key  # the same seal, judged by two readers


# -- every display reads a bundle once --------------------------------------------------------


def _provenance_bundle(tmp_path: Path) -> bytes:
    """A sealed provenance-lane run (one case) as a full bundle's bytes."""
    with open_store(str(tmp_path / "provenance.sqlite")) as store:
        ledger = Ledger(store, clock=counter_clock())
        ledger.start_run("pv", RunStartedBody(suite="provenance", protocols=1, k=1))
        w = ledger.new_stream("pv/c1/1")
        w.append(UnitStartedBody(protocol_id="c1", attempt=1))
        w.append(UnitFinishedBody(outcome={"grounded": True}))
        ledger.commit(w)
        ledger.seal("pv")
        export_run(ledger, "pv", str(tmp_path / "pv.jsonl"))
    return (tmp_path / "pv.jsonl").read_bytes()


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["report"], "capture_rate"),
        (["report", "--format", "json"], '"authenticated": true'),
        (["audit", "{}", "capture_rate"], "capture_rate ="),
        (["log"], "run_sealed"),
        (["provenance-report"], "replay_determinism"),
    ],
    ids=["report", "report-json", "audit", "log", "report-of-a-provenance-run"],
)
def test_a_display_of_a_bundle_served_once_reads_it_once_and_shows_it(
    runs, tmp_path, capsys, argv, shown
):
    """A FIFO gives one read: the display routes on (and shows) what the door read, never
    peeking at the file before (which left the door a second open that blocks)."""
    provenance = argv == ["provenance-report"]
    content = _provenance_bundle(tmp_path) if provenance else runs["genuine full"]
    served = Served(tmp_path / "once.jsonl", lambda n: content if n == 1 else None)
    command, *rest = ["report"] if provenance else argv
    rest = [served.path if a == "{}" else a for a in rest]
    if "{}" not in argv:
        rest = [served.path, *rest]
    pub = [] if provenance else ["--pubkey", str(runs["genuine pub"])]
    got = _read_once(served.path, lambda: main([command, *rest, *pub]))
    out = capsys.readouterr()
    assert got == [0] and served.opens == 1, f"{command} read the bundle twice:\n{out}"
    assert shown in out.out, out.out


# -- a run id or a file: how the target is written decides ------------------------------------


@pytest.fixture
def shadowed(runs, tmp_path, monkeypatch) -> str:
    """A ledger holding the genuine r1, in a folder holding a file named ``r1`` (the forged
    bundle); the current folder. Returns the ledger's path."""
    ledger = str(tmp_path / "l.sqlite")
    assert main(["import", _alone(runs, "genuine full", tmp_path), "--ledger", ledger]) == 0
    (tmp_path / "r1").write_bytes(runs["forged full"])  # type: ignore[arg-type]
    monkeypatch.chdir(tmp_path)
    return ledger


def test_a_file_named_like_a_run_id_never_shadows_the_run(runs, shadowed, capsys):
    capsys.readouterr()
    assert main(["verify", "r1", "--ledger", shadowed]) == 0
    out = capsys.readouterr().out
    assert "ok run r1: " in out and runs["genuine root"] in out, out
    assert runs["forged root"] not in out, out


def test_a_path_to_a_file_named_like_a_run_id_reads_the_file(runs, shadowed, capsys):
    capsys.readouterr()
    assert main(["verify", "./r1", "--ledger", shadowed]) == 0
    out = capsys.readouterr().out
    assert "ok bundle ./r1 (run r1)" in out and runs["forged root"] in out, out


def test_a_bare_name_the_ledger_lacks_says_how_to_read_the_file_of_that_name(
    runs, shadowed, tmp_path, capsys
):
    (tmp_path / "r9").write_bytes(runs["forged full"])  # type: ignore[arg-type]
    capsys.readouterr()
    assert main(["verify", "r9", "--ledger", shadowed]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no run 'r9'" in err[0] and "give ./r9 to read the file" in err[0]
