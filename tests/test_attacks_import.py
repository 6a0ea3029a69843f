"""Attacks through `import` and `--reset-cmd` (issue 27, items 5 and 6).

The attacker holds a bundle (any bundle: crafted, unsealed, of someone else's run) and
hands it to a publisher who imports it; or reads a published ledger or bundle looking for
the credentials a reset command carried, or a key a platform echoed back. Import must
never change a run it does not own, nor make one resumable or sealable as the importer's
own; no secret may reach a ledger byte or a bundle, full or redacted.
"""

from __future__ import annotations

import asyncio
import base64
import http.server
import json
import os
import shlex
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchledger import protocols
from benchledger.harness.agents import ScriptedAgent
from benchledger.harness.platforms.mcp_data_platform import McpDataPlatform
from benchledger.harness.record import RunConfig, read_record
from benchledger.harness.unit import UnitContext, UnitPlan
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.bundle import export_run
from benchledger.ledger.chain import Record
from benchledger.ledger.events import (
    RunStartedBody,
)
from benchledger.refplatform.server import LoopbackServer
from tests.conftest import (
    cli,
    external_config,
    interrupted_after,
    one_line_exit_2,
    planned_run,
    protocol_subset,
    refplatform_server,
    unit_stream,
)
from tests.sample import counter_clock

RUN = "vic"
ADMIN, POOL = "adm-PLANTED-key-5772", "pool-PLANTED-base"
SECRET, PASSWORD = "SECRET-PLANTED-1618", "pw-PLANTED-2718"
IDS = ["bl-keystone-region", "bl-margin-region"]


def rows(path: str) -> list[tuple[str, int, str, bytes]]:
    with open_store(path, create=False) as store:
        return [(s, q, k, bytes(d)) for s, q, k, d in store.scan(None)]


# -- import never changes a run it does not own -----------------------------------------------


def _unsealed_with_a_foreign_unit(tmp_path: Path) -> tuple[str, str]:
    """The issue's attack: the victim's interrupted run, and a bundle of it plus a unit the
    attacker wrote (finished, passing) where the victim's run has a unit still to run."""
    victim = str(tmp_path / "victim.sqlite")
    with open_store(victim) as store:
        planned_run(Ledger(store, clock=counter_clock()), RUN, ["p1", "p2"], ["p1"])
    forged = str(tmp_path / "forger.sqlite")
    with open_store(forged) as store:
        planned_run(Ledger(store, clock=counter_clock()), RUN, ["p1", "p2"], ["p1"])
        unit_stream(Ledger(store, clock=counter_clock(2 << 60)), f"{RUN}/p2/1", "p2")
        export_run(Ledger(store), RUN, str(tmp_path / "forged.jsonl"))
    return victim, str(tmp_path / "forged.jsonl")


def _sealed_with_another_root(tmp_path: Path) -> tuple[str, str]:
    """The victim's sealed run, and a sealed bundle of the same run id with other verdicts."""
    victim = str(tmp_path / "victim.sqlite")
    with open_store(victim) as store:
        planned_run(Ledger(store, clock=counter_clock()), RUN, ["p1"], ["p1"])
        Ledger(store, clock=counter_clock(3 << 60)).seal(RUN)
    forged = str(tmp_path / "forger.sqlite")
    with open_store(forged) as store:
        ledger = Ledger(store, clock=counter_clock())
        planned_run(ledger, RUN, ["p1"], [])
        unit_stream(ledger, f"{RUN}/p1/1", "p1", outcome=False)
        ledger.seal(RUN)
        export_run(ledger, RUN, str(tmp_path / "forged.jsonl"))
    return victim, str(tmp_path / "forged.jsonl")


def _sealed_plus_an_unsealed_stream(tmp_path: Path) -> tuple[str, str]:
    """The victim's sealed run, and a crafted unsealed bundle: the same header without its
    seal, the same unit, and one stream more (today it is appended, and the sealed run
    then fails verify forever: the store is append-only)."""
    victim = str(tmp_path / "victim.sqlite")
    with open_store(victim) as store:
        planned_run(Ledger(store, clock=counter_clock()), RUN, ["p1"], ["p1"])
        Ledger(store, clock=counter_clock(3 << 60)).seal(RUN)
        kept = [r for r in store.scan(RUN) if r[2] != "run_sealed"]
    forged = str(tmp_path / "forger.sqlite")
    with open_store(forged) as store:
        store.append([Record(*r) for r in kept])
        unit_stream(Ledger(store, clock=counter_clock(2 << 60)), f"{RUN}/p9/1", "p9")
        export_run(Ledger(store), RUN, str(tmp_path / "forged.jsonl"))
    return victim, str(tmp_path / "forged.jsonl")


@pytest.mark.parametrize(
    ("build", "why"),
    [
        (_unsealed_with_a_foreign_unit, "exists here, unsealed"),
        (_sealed_with_another_root, "sealed here with root"),
        (_sealed_plus_an_unsealed_stream, "sealed here with root"),
    ],
    ids=["unit-into-an-interrupted-run", "sealed-run-of-another-root", "stream-onto-a-sealed-run"],
)
def test_a_bundle_of_a_run_this_ledger_holds_is_refused_in_one_line_and_nothing_is_written(
    tmp_path, capsys, build, why
):
    victim, forged = build(tmp_path)
    before = rows(victim)
    code, _, err = cli(capsys, "import", forged, "--ledger", victim)
    one_line_exit_2(code, err, f"run '{RUN}'", why, "nothing was imported")
    assert rows(victim) == before
    assert cli(capsys, "verify", RUN, "--ledger", victim, "--allow-unsealed")[0] == 0


def test_a_unit_a_bundle_brings_to_an_interrupted_run_is_still_the_victims_to_run(tmp_path, capsys):
    victim, forged = _unsealed_with_a_foreign_unit(tmp_path)
    assert cli(capsys, "import", forged, "--ledger", victim)[0] == 2
    with open_store(victim, create=False) as store:
        assert Ledger(store).unfinished(RUN) == ["p2/1"]  # still the victim's to run


def test_importing_the_same_sealed_run_again_is_a_no_op_that_says_so(tmp_path, capsys):
    source = str(tmp_path / "source.sqlite")
    with open_store(source) as store:
        ledger = Ledger(store, clock=counter_clock())
        planned_run(ledger, RUN, ["p1"], ["p1"])
        root = ledger.seal(RUN)
        export_run(ledger, RUN, str(tmp_path / "run.jsonl"))
    other = str(tmp_path / "other.sqlite")
    assert cli(capsys, "import", str(tmp_path / "run.jsonl"), "--ledger", other)[0] == 0
    before = rows(other)
    code, out, _ = cli(capsys, "import", str(tmp_path / "run.jsonl"), "--ledger", other)
    assert code == 0 and "already" in out and root in out and "nothing to import" in out
    assert rows(other) == before


def test_an_unsealed_bundle_is_refused_unless_allowed_and_no_ledger_is_left_behind(
    tmp_path, capsys
):
    source = str(tmp_path / "source.sqlite")
    with open_store(source) as store:
        planned_run(Ledger(store, clock=counter_clock()), RUN, ["p1", "p2"], ["p1"])
        export_run(Ledger(store), RUN, str(tmp_path / "open.jsonl"))
    target = tmp_path / "new.sqlite"
    code, _, err = cli(capsys, "import", str(tmp_path / "open.jsonl"), "--ledger", str(target))
    one_line_exit_2(code, err, f"run '{RUN}'", "not sealed", "--allow-unsealed")
    assert not target.exists()


# -- an imported run is never resumed, joined or sealed by the importer -------------------------


def test_resuming_an_imported_run_is_refused_naming_the_units_it_did_not_write(tmp_path, capsys):
    publisher = str(tmp_path / "publisher.sqlite")
    with open_store(publisher) as store:
        cfg = RunConfig(protocols_path=protocol_subset(tmp_path, IDS), run_id=RUN, concurrency=1)
        interrupted_after(Ledger(store), cfg, 1)
        export_run(Ledger(store), RUN, str(tmp_path / "open.jsonl"))
    mine = str(tmp_path / "mine.sqlite")
    code, out, _ = cli(capsys, "import", str(tmp_path / "open.jsonl"), "--allow-unsealed",
                       "--ledger", mine)  # fmt: skip
    assert code == 0 and "UNSEALED" in out and "cannot be resumed" in out
    before = rows(mine)
    code, _, err = cli(capsys, "run", "--resume", RUN, "--ledger", mine)
    one_line_exit_2(code, err, f"run '{RUN}'", "arrived by import", f"{IDS[0]}/1")
    assert rows(mine) == before
    assert cli(capsys, "verify", RUN, "--ledger", mine, "--allow-unsealed")[0] == 0


def test_a_complete_imported_run_is_not_sealed_or_signed_here(tmp_path, capsys):
    source = str(tmp_path / "source.sqlite")
    with open_store(source) as store:
        planned_run(Ledger(store, clock=counter_clock()), RUN, ["p1"], ["p1"])
        export_run(Ledger(store), RUN, str(tmp_path / "done.jsonl"))
    mine = str(tmp_path / "mine.sqlite")
    assert cli(capsys, "import", str(tmp_path / "done.jsonl"), "--allow-unsealed",
               "--ledger", mine)[0] == 0  # fmt: skip
    before = rows(mine)
    code, _, err = cli(capsys, "seal", RUN, "--ledger", mine)
    one_line_exit_2(code, err, f"run '{RUN}'", "arrived by import")
    assert rows(mine) == before


def test_an_imported_run_keeps_saying_so_when_exported_and_imported_again(tmp_path, capsys):
    source = str(tmp_path / "source.sqlite")
    with open_store(source) as store:
        planned_run(Ledger(store, clock=counter_clock()), RUN, ["p1"], ["p1"])
        export_run(Ledger(store), RUN, str(tmp_path / "a.jsonl"))
    first, second = str(tmp_path / "first.sqlite"), str(tmp_path / "second.sqlite")
    assert cli(capsys, "import", str(tmp_path / "a.jsonl"), "--allow-unsealed",
               "--ledger", first)[0] == 0  # fmt: skip
    assert cli(capsys, "export", RUN, "-o", str(tmp_path / "b.jsonl"), "--ledger", first)[0] == 0
    assert cli(capsys, "import", str(tmp_path / "b.jsonl"), "--allow-unsealed",
               "--ledger", second)[0] == 0  # fmt: skip
    code, _, err = cli(capsys, "seal", RUN, "--ledger", second)
    one_line_exit_2(code, err, "arrived by import")


# -- the reset command is recorded as a program name and a salted digest ------------------------


@pytest.fixture
def platform() -> Iterator[LoopbackServer]:
    with refplatform_server(ADMIN, POOL) as server:
        yield server


def _reset(url: str, secret: str = SECRET, password: str = PASSWORD) -> str:
    """The issue's reset command (a bearer header and a --user password), against a live
    URL so it succeeds: curl without -f exits 0 whatever the status."""
    header = shlex.quote(f"Authorization: Bearer {secret}")
    return f"curl -s -o /dev/null -H {header} --user u:{password} {url}/reset"


def _external(*extra: str, url: str, ledger: str, path: str = "") -> list[str]:
    argv = ["run", "--platform", url, "--admin-key", ADMIN, "--pool-base", POOL,
            "--pool-size", "60", "--ledger", ledger, *extra]  # fmt: skip
    return argv + (["--protocols", path] if path else [])


def test_a_reset_command_leaves_no_secret_in_the_ledger_or_any_bundle(tmp_path, platform, capsys):
    ledger = str(tmp_path / "l.sqlite")
    argv = _external("--run-id", RUN, "--k", "2", "--reset-cmd", _reset(platform.url),
                     url=platform.url, ledger=ledger,
                     path=protocol_subset(tmp_path, IDS))  # fmt: skip
    code, out, err = cli(capsys, *argv)
    assert code == 0, err
    full, red = str(tmp_path / "full.jsonl"), str(tmp_path / "red.jsonl")
    assert cli(capsys, "export", RUN, "-o", full, "--ledger", ledger)[0] == 0
    assert cli(capsys, "export", RUN, "-o", red, "--withhold", "model_call,session_call",
               "--ledger", ledger)[0] == 0  # fmt: skip
    stored = b"".join(Path(p).read_bytes() for p in (ledger, full, red))
    for secret in (SECRET, PASSWORD, ADMIN, POOL):
        assert secret.encode() not in stored, secret
        assert secret not in out + err, secret
    record = read_record(Ledger(open_store(ledger, create=False)), RUN)
    assert record.reset_cmd == "" and record.reset_program == "curl" and record.reset_digest


def _interrupted_with_reset(tmp_path: Path, url: str) -> str:
    ledger = str(tmp_path / "l.sqlite")
    with open_store(ledger) as store:
        cfg = external_config(url, ADMIN, POOL, protocols_path=protocol_subset(tmp_path, IDS),
                              run_id=RUN, k=2, concurrency=1, reset_cmd=_reset(url))  # fmt: skip
        interrupted_after(Ledger(store), cfg, 1)
    return ledger


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (None, "give --reset-cmd again"),
        ("wrong-password", "not the reset command the run recorded"),
    ],
    ids=["missing", "different"],
)
def test_resuming_without_the_recorded_reset_command_is_refused_before_anything_is_written(
    tmp_path, platform, capsys, given, says
):
    ledger = _interrupted_with_reset(tmp_path, platform.url)
    before = rows(ledger)
    extra = [] if given is None else ["--reset-cmd", _reset(platform.url, password=given)]
    code, _, err = cli(capsys, *_external("--resume", RUN, *extra, url=platform.url, ledger=ledger))
    one_line_exit_2(code, err, f"run {RUN}", says, "curl")
    assert rows(ledger) == before


def test_resuming_with_the_recorded_reset_command_finishes_and_seals_the_run(
    tmp_path, platform, capsys
):
    ledger = _interrupted_with_reset(tmp_path, platform.url)
    argv = _external("--resume", RUN, "--reset-cmd", _reset(platform.url), url=platform.url,
                     ledger=ledger)  # fmt: skip
    code, _, err = cli(capsys, *argv)
    assert code == 0, err
    assert Ledger(open_store(ledger, create=False)).run_info(RUN).root


# -- a key the platform echoes back is recorded redacted, in any case or encoding ---------------


def _forms(key: str) -> dict[str, str]:
    raw = key.encode()
    return {
        "upper": key.upper(),
        "lower": key.lower(),
        "base64": base64.b64encode(raw).decode(),
        "base64-urlsafe-unpadded": base64.urlsafe_b64encode(raw).decode().rstrip("="),
        "base64-in-a-longer-blob": base64.b64encode(b"Bearer " + raw + b" ok").decode(),
        "url-encoded": urllib.parse.quote(key, safe=""),
        "percent-every-byte": "".join(f"%{b:02X}" for b in raw),
        "hex": raw.hex().upper(),
        "json-escaped": "".join(f"\\u{ord(c):04x}" for c in key),
    }


FORMS = list(_forms(ADMIN))


class _Echo(http.server.BaseHTTPRequestHandler):
    """A platform's admin API that echoes the bearer key it was sent, in one form."""

    form = "upper"

    def do_GET(self) -> None:
        key = self.headers["Authorization"].removeprefix("Bearer ")
        body = json.dumps({"data": [], "whoami": f"token {_forms(key)[self.form]} accepted"})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("form", FORMS)
def test_a_server_echoing_the_admin_key_in_any_case_or_encoding_is_recorded_redacted(
    tmp_path, form
):
    handler = type("Echo", (_Echo,), {"form": form})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        client = McpDataPlatform(url, admin_key=ADMIN, pool_base=POOL, pool_size=4)
        path = str(tmp_path / "l.sqlite")
        ledger = Ledger(open_store(path))
        ledger.start_run("echo", RunStartedBody(suite="lifecycle"))
        item = protocols.load(protocols.LIFECYCLE_DIR).by_id()[IDS[0]]
        ctx = UnitContext(ledger, client, ScriptedAgent(), UnitPlan(item, 1, "echo/x/1", (1, 2)))

        async def read() -> None:
            await ctx.read("whoami", lambda: client.rest("GET", "/api/v1/admin/whoami"),
                           lambda got: None)  # fmt: skip
            await ctx.commit()

        asyncio.run(read())
        ledger.store.close()
    finally:
        server.shutdown()
        server.server_close()
    stored = Path(path).read_bytes()
    echoed = _forms(ADMIN)[form]
    for shown in (echoed, json.dumps(echoed)[1:-1], ADMIN):  # as sent, as stored in JSON, bare
        assert shown.encode() not in stored, shown
    assert b"<redacted>" in stored and b"accepted" in stored


# -- import-peer reads only real files inside the folder it was given (issue 39, item 6) ------


def _arm_copy(tmp_path: Path) -> Path:
    from tests.test_tasks_import import SMALL, _copy, family_dir

    return _copy(os.path.join(family_dir("rq1-warehouse"), SMALL), tmp_path / "fam" / SMALL)


def _elsewhere(tmp_path: Path) -> Path:
    """A JSON file of the importing user's, outside the arm: what a symlink would seal."""
    other = tmp_path / "private" / "secrets.json"
    other.parent.mkdir()
    other.write_text(json.dumps({"token": SECRET}))
    return other


def _snapshot_link(arm: Path, tmp_path: Path) -> str:
    snapshot = arm / "datahub-orders-baseline.json"
    snapshot.unlink()
    snapshot.symlink_to(_elsewhere(tmp_path))
    return str(snapshot)


def _transcripts_link(arm: Path, tmp_path: Path) -> str:
    folder = arm / "results.json.transcripts"
    moved = tmp_path / "private-transcripts"
    folder.rename(moved)
    folder.symlink_to(moved, target_is_directory=True)
    return str(folder)


def _transcript_nested(arm: Path, tmp_path: Path) -> str:
    """The attempt's transcript with one more key, an array nested 200,000 deep."""
    (path,) = (arm / "results.json.transcripts").iterdir()
    text = path.read_text()
    assert text.startswith("{")
    path.write_text('{"deep": ' + "[" * 200_000 + "]" * 200_000 + ", " + text[1:])
    return str(path)


def _task_link(arm: Path, tmp_path: Path) -> str:
    task = next((arm / "tasks").glob("*.yaml"))
    moved = tmp_path / "private-task.yaml"
    task.rename(moved)
    task.symlink_to(moved)
    return str(task)


SYMLINKS = {
    "snapshot-symlink": (_snapshot_link, "is a symbolic link"),
    "transcripts-folder-symlink": (_transcripts_link, "is a symbolic link"),
    "task-file-symlink": (_task_link, "is a symbolic link"),
    "transcript-nested-200000-deep": (_transcript_nested, "at most 64 are allowed"),
}


@pytest.mark.parametrize(("plant", "says"), SYMLINKS.values(), ids=SYMLINKS.keys())
def test_import_peer_refuses_a_symlinked_or_too_deep_peer_file_with_one_line(
    tmp_path, capsys, plant, says
):
    arm = _arm_copy(tmp_path)
    named = plant(arm, tmp_path)
    ledger = str(tmp_path / "l.sqlite")
    code, _, err = cli(capsys, "import-peer", "mcp-data-platform", str(arm), "--ledger", ledger)
    one_line_exit_2(code, err, named, says)
    assert not os.path.exists(ledger)  # nothing written


def test_import_peer_refuses_a_family_whose_arm_folder_is_a_symlink(tmp_path, capsys):
    arm = _arm_copy(tmp_path)
    family = tmp_path / "family"
    family.mkdir()
    (family / arm.name).symlink_to(arm, target_is_directory=True)
    ledger = str(tmp_path / "l.sqlite")
    code, _, err = cli(capsys, "import-peer", "mcp-data-platform", str(family), "--ledger", ledger)
    one_line_exit_2(code, err, str(family / arm.name), "is a symbolic link")
    assert not os.path.exists(ledger)


def test_import_peer_refuses_a_results_files_transcripts_folder_found_as_a_symlink(
    tmp_path, capsys
):
    """The results file is the user's to name (a link is fine); the transcripts folder found
    beside it is not: a link there would seal whatever it points at."""
    from tests.test_peer_import import k5_paths

    _, dirs = k5_paths()
    one = os.path.dirname(dirs[0])  # one pass: its results file and transcripts folder
    results = tmp_path / "pass" / "lifecycle-a3.json"
    results.parent.mkdir()
    results.symlink_to(os.path.join(one, "lifecycle-a3.json"))
    found = tmp_path / "pass" / "lifecycle-a3.json.transcripts"
    found.symlink_to(dirs[0], target_is_directory=True)
    ledger = str(tmp_path / "l.sqlite")
    protocols_dir = os.path.join(os.path.dirname(os.path.dirname(one)), "..", "protocols")
    argv = ["import-peer", "mcp-data-platform", str(results), "--ledger", ledger]
    code, _, err = cli(capsys, *argv, "--protocols", os.path.normpath(protocols_dir))
    one_line_exit_2(code, err, str(found), "is a symbolic link")
    assert not os.path.exists(ledger)
    # named by the user, the same folder is theirs to give
    code, _, err = cli(capsys, *argv, "--protocols", os.path.normpath(protocols_dir),
                         "--transcripts", str(found))  # fmt: skip
    assert code == 0, err
