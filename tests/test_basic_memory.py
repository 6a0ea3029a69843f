"""basic-memory as the third platform behind the adapter.

The scope rules, the option parsing and the interpreter finder are checked on their own;
everything else runs the real basic-memory server over streamable HTTP, installed once
per machine into ``$BENCHLEDGER_BASIC_MEMORY_DIR`` when set, else
``${XDG_CACHE_HOME:-~/.cache}/benchledger/basic-memory`` (about 650 MB, 1-2 minutes the
first time), and skipped, saying why, only where no Python >= 3.12 exists.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat

import pytest

from benchledger import protocols
from benchledger.cli import main
from benchledger.harness.agents import ScriptedAgent
from benchledger.harness.platforms.base import PollPolicy
from benchledger.harness.platforms.basic_memory import (
    SHARED,
    BasicMemory,
    Scope,
    path_project,
    project_key,
)
from benchledger.harness.platforms.basic_memory_server import (
    VERSION,
    PlatformStartFailed,
    find_python,
    install,
    serve,
)
from benchledger.harness.platforms.provision import parse_platform
from benchledger.harness.platforms.vocabulary import BASIC_MEMORY
from benchledger.harness.suites.lifecycle import target
from benchledger.harness.unit import UnitContext, UnitPlan
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import (
    ReadBackBody,
    ReadBackEvent,
    RunStartedBody,
    RunStartedEvent,
    SessionCallEvent,
)
from tests.test_runner import subset

# Two datahub promotions, two knowledge-page promotions, two updates.
SUBSET = [
    "bl-anchor-tier", "bl-whale-orders", "bl-core-cohort", "bl-dormant-customers",
    "bl-audit-channel", "bl-focus-region",
]  # fmt: skip
BY_ID = protocols.load(protocols.LIFECYCLE_DIR).by_id()


def _cache_dir() -> str:
    """Where the tests keep the install: the same folder every run, so CI pays it once."""
    given = os.environ.get("BENCHLEDGER_BASIC_MEMORY_DIR")
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return given or os.path.join(cache, "benchledger", "basic-memory")


@pytest.fixture(scope="session")
def bm_dir() -> str:
    """The pinned basic-memory installed (on first use) into the cache folder."""
    try:
        find_python()
    except PlatformStartFailed as exc:
        pytest.skip(f"basic-memory needs Python >= 3.12: {exc}")
    folder = _cache_dir()
    install(VERSION, folder)
    return folder


@pytest.fixture(scope="session")
def argv(bm_dir) -> list[str]:
    return [install(VERSION, bm_dir)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, bm_dir) -> str:
    """One ledger with the subset run on basic-memory ("bm")."""
    folder = tmp_path_factory.mktemp("bm-runs")
    path = subset(folder, SUBSET)
    ledger = str(folder / "l.sqlite")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BENCHLEDGER_BASIC_MEMORY_DIR", bm_dir)
        argv = ["run", "--protocols", path, "--ledger", ledger, "--platform", "basic-memory"]
        assert main([*argv, "--run-id", "bm"]) == 0
    return ledger


def _events(path: str, run_id: str) -> list:
    store = open_store(path)
    try:
        return [e for e, _ in Ledger(store).events(run_id)]
    finally:
        store.close()


# -- end to end, on the real server ---------------------------------------------------------


@pytest.mark.slow
def test_a_scripted_run_on_basic_memory_passes_every_stage_and_replays_from_the_log(runs, capsys):
    assert main(["verify", "bm", "--ledger", runs]) == 0
    assert main(["replay", "bm", "--level", "rederive", "--ledger", runs]) == 0
    assert main(["replay", "bm", "--level", "full", "--ledger", runs]) == 0
    out = capsys.readouterr().out
    assert "compared 26 episodes, 6 units, 1 probe, all equal" in out
    assert main(["report", "bm", "--ledger", runs]) == 0
    out = capsys.readouterr().out
    for line in ("capture_rate                           6/6",
                 "transfer_rate                          4/4",  # pages apply here
                 "update_correctness                     2/2",
                 "duplicate_rate                         0/2",
                 "full_lifecycle                         6/6"):  # fmt: skip
        assert line in out
    assert "n/a stages" not in out


@pytest.mark.slow
def test_the_run_records_the_pypi_release_and_every_read_back_on_disk_and_over_mcp(runs):
    evs = _events(runs, "bm")
    started = next(e for e in evs if isinstance(e, RunStartedEvent))
    platform = started.body.record.platform
    assert (platform.kind, platform.url) == ("basic-memory", f"pypi:basic-memory=={VERSION}")
    assert (platform.name, platform.version) == ("basic-memory", VERSION)
    calls = [e.body for e in evs if isinstance(e, SessionCallEvent)]
    # The handshake's version is FastMCP's, not basic-memory's.
    assert {c.result["server"]["name"] for c in calls if c.method == "initialize"} == {
        "Basic Memory"
    }
    reads = [e.body for e in evs if isinstance(e, ReadBackEvent)]
    assert {b.method for b in reads} == {"DISK", "MCP", "DESCRIBE"}
    # A busy server answers a write before its file is on disk, so a capture check polls:
    # an early read may find no note yet; each unit's last one finds it.
    last: dict[str, ReadBackBody] = {}
    for e in evs:
        if isinstance(e, ReadBackEvent) and e.body.purpose == "capture":
            last[e.stream] = e.body
    assert last
    for stream, b in last.items():  # read_note's checksum is the file's sha256 on disk
        assert b.body["notes"], stream
        note = b.body["notes"][0]
        assert note["note"]["checksum"] == note["sha256"] and b.observed["ids"]


@pytest.mark.slow
def test_an_exported_basic_memory_run_passes_replay_check(runs, tmp_path, capsys):
    bundle = tmp_path / "bundles" / "bm.jsonl"
    bundle.parent.mkdir()
    assert main(["export", "bm", "--ledger", runs, "--output", str(bundle)]) == 0
    assert main(["replay", "check", str(bundle.parent)]) == 0


def _ctx(client: BasicMemory, ledger: Ledger, pid: str, stream: str) -> UnitContext:
    if not ledger.store.run_ids():
        ledger.start_run("t", RunStartedBody(suite="lifecycle"))
    return UnitContext(ledger, client, ScriptedAgent(), UnitPlan(BY_ID[pid], 1, stream, (1, 2)))


@pytest.mark.slow
def test_the_adapter_refuses_a_cross_project_write_the_constrained_server_would_redirect(
    argv, tmp_path
):
    """A server started with ``--project bench-agent-001`` takes a write aimed at
    bench-agent-002 and silently puts it into bench-agent-001; the adapter never sends it."""
    folder = str(tmp_path)
    note = {"title": "leak", "content": "# leak\n\n- [x] not yours", "directory": "notes",
            "project": "bench-agent-002", "output_format": "json"}  # fmt: skip

    async def go():
        async with serve(argv, folder) as url:  # make both projects, unconstrained
            client = BasicMemory(url, folder, pool_size=4)
            for project in ("bench-agent-001", "bench-agent-002"):
                await client.ensure_project(project)
        async with serve(argv, folder, project="bench-agent-001") as url:
            client = BasicMemory(url, folder, pool_size=4)
            client._made |= {"bench-agent-001", "bench-agent-002"}
            async with client._open(None, Scope("bench-agent-001", None), "raw") as raw:
                sent = await raw.call_tool("write_note", note)  # no scope: straight through
            async with client.session(1) as scoped:
                refused = await scoped.call_tool("write_note", {**note, "title": "leak2"})
        return sent, refused

    sent, refused = asyncio.run(go())
    assert not sent.is_error, sent.text
    projects = os.path.join(folder, "projects")
    landed = {p for p in os.listdir(projects)
              if os.path.exists(os.path.join(projects, p, "notes", "leak.md"))}  # fmt: skip
    assert landed == {"bench-agent-001"}, "the constrained server redirected the write"
    assert refused.is_error and "refused by benchledger" in refused.text
    assert "bench-agent-002" in refused.text
    assert not any(os.path.exists(os.path.join(projects, p, "notes", "leak2.md"))
                   for p in os.listdir(projects))  # fmt: skip


@pytest.mark.slow
def test_an_in_place_correction_is_a_new_version_and_the_original_text_is_gone(argv, tmp_path):
    p = BY_ID["bl-audit-channel"]
    assert p.update is not None
    ledger = Ledger(open_store(":memory:"))
    args = {"title": "memory.bench.orders", "directory": "datasets", "output_format": "json",
            "content": f"# memory.bench.orders\n\n- [definition] {p.fact}\n"}  # fmt: skip

    async def go():
        async with serve(argv, str(tmp_path)) as url:
            client = BasicMemory(url, str(tmp_path), pool_size=4)
            await client.ensure_project(SHARED)
            async with client.session(1) as s:
                assert not (await s.call_tool("write_note", args)).is_error
            ctx = _ctx(client, ledger, p.id, "t/1")
            ctx.stage = "capture"
            tgt = target(p)
            check = await client.check_capture(
                ctx, identity=1, target=tgt, since=0.0, poll=PollPolicy(0.0)
            )
            async with client.session(1) as s:
                edit = {"identifier": "datasets/memory.bench.orders", "operation": "find_replace",
                        "find_text": p.fact, "content": p.update.fact}  # fmt: skip
                assert not (await s.call_tool("edit_note", edit)).is_error
            ctx.stage = "update"
            upd = await client.check_update(
                ctx, identity=1, original=check.found, target=tgt, since=0.0
            )
            return check, upd

    check, upd = asyncio.run(go())
    assert check.found and check.found.startswith(
        "bench-agent-001:datasets/memory.bench.orders.md@"
    )
    assert upd.landed and upd.landed != check.found
    assert upd.landed.split("@")[0] == check.found.split("@")[0]  # the same note, in place
    assert upd.original_status == "superseded" and not upd.duplicated


# -- isolation: every tool an agent sees keeps identities apart (issue 50, item 3) ---------

ONE = "bench-agent-001"
SECRET = "the vault code is 4417"
# Identity 1's note named every way a call can name it: bare (the caller's own project),
# with identity 1's project prefixed or as a memory:// URL, and out of the caller's folder.
NAMED = ("notes/vault", f"{ONE}/notes/vault", f"memory://{ONE}/notes/vault",
         "../bench-agent-001/notes/vault.md")  # fmt: skip
_BY_PROJECT = {"project": ONE}


def _each(key: str, **more) -> list[dict]:
    return [{key: n, **more} for n in NAMED] + [{key: "notes/vault", **_BY_PROJECT, **more}]


# What identity 2 tries on identity 1's note with each tool it is shown: reads, changes and
# deletes aimed at the note, listings of identity 1's project, and the project itself; the
# reads first, the changes next and the deletes last, so each finds the note there.
BM_ATTEMPTS: dict[str, list[dict]] = {
    "basic_memory_diagnostics": [{}],
    "list_workspaces": [{}],
    "list_memory_projects": [{}],
    "man": [{"query": "vault"}, _BY_PROJECT],
    "search_notes": [{"query": "vault"}, {"query": "vault", **_BY_PROJECT},
                     {"query": "vault", "projects": [ONE]},
                     {"query": "vault", "search_all_projects": True}],
    "search": [{"query": "vault"}],
    "grep": [{"pattern": "4417"}, {"pattern": "4417", **_BY_PROJECT}],
    "read_note": _each("identifier"),
    "view_note": _each("identifier"),
    "read_content": _each("path"),
    "cat": _each("identifier"),
    "fetch": [{"id": n} for n in NAMED],
    "build_context": _each("url"),
    "recent_activity": [{}, {"timeframe": "1d", **_BY_PROJECT}],
    "tail": [{}, _BY_PROJECT],
    "list_directory": [{"dir_name": "/", "depth": 3}, {"dir_name": "/", **_BY_PROJECT},
                       {"dir_name": f"{ONE}/notes"}, {"dir_name": "../bench-agent-001"}],
    "ls": [{"path": "/"}, {"path": f"{ONE}/notes"}, {"path": "/", **_BY_PROJECT}],
    "find": [{"path": "/"}, {"path": f"{ONE}/"}, {"path": "/", **_BY_PROJECT}],
    "schema_validate": _each("identifier"),
    "schema_infer": [{"note_type": "note"}, {"note_type": "note", **_BY_PROJECT}],
    "schema_diff": [{"note_type": "note"}, {"note_type": "note", **_BY_PROJECT}],
    "write_note": [{"title": "vault", "directory": "notes", "content": "overwritten",
                    "overwrite": True, **_BY_PROJECT}],
    "edit_note": _each("identifier", operation="append", content="changed"),
    "move_note": _each("identifier", destination_path="notes/moved.md"),
    "create_memory_project": [{"project_name": "mine", "project_path": f"../{ONE}"}],
    "delete_note": [*_each("identifier"), {"identifier": f"{ONE}/notes", "is_directory": True}],
    "delete_project": [{"project_name": ONE, "delete_notes": True}],
}  # fmt: skip


def _bytes(path: str) -> bytes | None:
    """The file's bytes, None when it is gone."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


@pytest.mark.slow
def test_a_second_identity_cannot_read_change_or_delete_the_firsts_note_with_any_tool_it_sees(
    argv, tmp_path
):
    """Identity 1 keeps a private note; identity 2 calls every tool it is shown, naming the
    note and identity 1's project every way a call can: no answer holds the note's text,
    and identity 1's file is on disk unchanged and read back whole."""
    folder = str(tmp_path)
    note = {"title": "vault", "directory": "notes", "content": f"# vault\n\n- {SECRET}\n"}

    async def go():
        async with serve(argv, folder) as url:
            client = BasicMemory(url, folder, pool_size=4)
            async with client.session(1) as one:
                assert not (await one.call_tool("write_note", note)).is_error
            path = os.path.join(client.project_dir(ONE), "notes", "vault.md")
            before = _bytes(path)
            async with client.session(2) as two:
                shown = {t["name"] for t in BASIC_MEMORY.shown(await two.list_tools())}
                said = [(tool, args, await two.call_tool(tool, dict(args)))
                        for tool, tries in BM_ATTEMPTS.items() if tool in shown
                        for args in tries]  # fmt: skip
            async with client.session(1) as one:
                back = await one.call_tool("read_note", {"identifier": "notes/vault"})
            after = _bytes(path)
            return shown, said, before, after, back

    shown, said, before, after, back = asyncio.run(go())
    assert shown == set(BM_ATTEMPTS), "a tool an agent sees is not tried here"
    for tool, args, got in said:
        assert "4417" not in got.text, (tool, args, got.text)
    assert after == before
    assert SECRET in back.text, back.text


# -- the rules, without a server -------------------------------------------------------------

OWN, OTHER = "bench-agent-001", "bench-agent-002"
POOL = Scope(OWN, {OWN, SHARED})


@pytest.mark.parametrize(
    ("tool", "args", "refused"),
    [
        ("write_note", {"project": OWN}, ""),
        ("write_note", {}, ""),
        ("write_note", {"project": OTHER}, "write_note on project 'bench-agent-002'"),
        ("write_note", {"project": SHARED}, "may write only bench-agent-001"),
        ("edit_note", {"identifier": f"memory://{OTHER}/datasets/x"}, "'bench-agent-002'"),
        ("read_note", {"project": SHARED}, ""),
        ("read_note", {"identifier": f"{OTHER}/datasets/x"}, "'bench-agent-002'"),
        ("read_note", {"project": "main"}, "'main'"),
        ("search_notes", {"projects": [OWN, SHARED]}, ""),
        ("search_notes", {"projects": [OWN, OTHER]}, "'bench-agent-002'"),
        ("search_notes", {"search_all_projects": True}, "every identity's project"),
        ("write_note", {"project": [OTHER]}, "['bench-agent-002']"),
        ("write_note", {"project_id": "c88b2a4c"}, "project_id is not accepted"),
        ("write_note", {"workspace": "w"}, "workspace is not accepted"),
        ("create_memory_project", {"project_name": "x"}, "only the harness"),
        ("delete_project", {"project_name": OTHER}, "only the harness"),
        ("search", {"query": "x"}, "default project"),
        ("man", {}, ""),
        ("list_memory_projects", {}, ""),
    ],
    ids=lambda v: v if isinstance(v, str) and len(v) < 30 else None,
)
def test_an_identity_may_write_its_own_project_and_read_its_own_and_the_shared_one(
    tool, args, refused
):
    said = POOL.refusal(tool, args)
    assert (said == "") if not refused else (refused in said)


# Another identity's project spelt as the server would still find it (basic-memory 0.24.1
# refuses these itself today; the adapter must not depend on that).
OTHER_SPELLINGS = [
    ("edit_note", {"identifier": "memory://Bench-Agent-002/datasets/x"}, "url-in-title-case"),
    ("read_note", {"identifier": "MEMORY://bench-agent-002/datasets/x"}, "scheme-upper-case"),
    ("read_note", {"identifier": "bench_agent_002/datasets/x"}, "underscores"),
    ("read_note", {"identifier": "BENCH-AGENT-002/datasets/x"}, "upper-case-path"),
    ("read_note", {"identifier": "bench-agent-002::datasets/x"}, "double-colon"),
    ("read_note", {"identifier": "memory://bench-agent-002::x"}, "url-double-colon"),
    ("read_note", {"identifier": "memory://bench-agent-002"}, "url-of-the-project"),
    ("write_note", {"project": "bench_agent_002"}, "project-underscores"),
    ("write_note", {"project": "memory://bench-agent-002"}, "project-as-url"),
    ("search_notes", {"projects": [OWN, "Bench_Agent_002"]}, "projects-mixed-case"),
    ("move_note", {"destination_path": "Bench_Agent_002/x.md"}, "move-into-it"),
]


@pytest.mark.parametrize(
    ("tool", "args"), [c[:2] for c in OTHER_SPELLINGS], ids=[c[2] for c in OTHER_SPELLINGS]
)
def test_another_identitys_project_is_refused_however_its_name_is_spelt(tool, args):
    assert "'" in POOL.refusal(tool, args)  # names the project it refused


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("Bench-Agent-002", "bench-agent-002"),
        ("bench_agent_002", "bench-agent-002"),
        ("memory://Bench_Agent_002/", "bench-agent-002"),
        (" SHARED ", "shared"),
    ],
    ids=["title-case", "underscores", "url-with-slash", "spaces-and-case"],
)
def test_a_project_name_is_compared_as_the_server_matches_it(name, key):
    assert project_key(name) == key


@pytest.mark.parametrize(
    ("path", "project"),
    [
        ("memory://Bench-Agent-002/x", "bench-agent-002"),
        ("bench_agent_002::x", "bench-agent-002"),
        ("datasets/x", ""),
        ("bench-agent-002", ""),  # a bare title, no project before it
        ("Shared/x", "shared"),
    ],
    ids=["url", "double-colon", "a-folder", "a-bare-title", "shared-title-case"],
)
def test_a_paths_project_is_read_from_its_first_part(path, project):
    assert path_project(path) == project


def test_the_identitys_own_project_in_another_spelling_is_its_own():
    assert POOL.refusal("write_note", {"project": "Bench_Agent_001"}) == ""
    assert POOL.refusal("read_note", {"identifier": "memory://SHARED/x"}) == ""


def test_a_call_naming_no_project_is_sent_to_the_identitys_own_and_searches_add_shared():
    assert POOL.wired("write_note", {"title": "t"}) == {"title": "t", "project": OWN}
    assert POOL.wired("search_notes", {"query": "q"}) == {
        "query": "q", "projects": [OWN, SHARED]
    }  # fmt: skip
    assert POOL.wired("read_note", {"project": SHARED}) == {"project": SHARED}
    assert POOL.wired("man", {}) == {} and POOL.wired("list_memory_projects", {}) == {}
    harness = Scope(SHARED, None)
    assert harness.refusal("write_note", {"project": OTHER}) == ""
    assert harness.wired("search_notes", {"query": "q"}) == {"query": "q", "project": SHARED}


def test_the_platform_option_pins_an_exact_pypi_version():
    assert parse_platform("basic-memory").url == f"pypi:basic-memory=={VERSION}"
    assert parse_platform("basic-memory@0.24.0") == parse_platform("pypi:basic-memory==0.24.0")
    assert parse_platform("basic-memory").kind == "basic-memory"
    with pytest.raises(ValueError, match="pin an exact version"):
        parse_platform("basic-memory@>=0.24")
    with pytest.raises(ValueError, match="given again"):
        parse_platform("basic-memory-cmd:bm <redacted>")


def _exe(path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{text}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_the_finder_runs_each_candidate_and_skips_a_pyenv_shim_that_fails(tmp_path, monkeypatch):
    """``python3.12`` on PATH is a pyenv shim failing for a version not activated; the real
    interpreter is in ~/.pyenv/versions/*/bin/."""
    _exe(tmp_path / "bin" / "python3.12",
         "echo 'pyenv: python3.12: command not found' >&2; exit 127")  # fmt: skip
    _exe(tmp_path / "bin" / "python3", 'echo "3 11"')
    real = tmp_path / "home" / ".pyenv" / "versions" / "3.12.1" / "bin" / "python3.12"
    _exe(real, 'echo "3 12"')
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert find_python(home=str(tmp_path / "home")) == str(real)
    real.unlink()
    with pytest.raises(PlatformStartFailed, match="--basic-memory-python PATH"):
        find_python(home=str(tmp_path / "home"))


def test_an_interpreter_older_than_3_12_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    old = tmp_path / "py311"
    _exe(old, 'echo "3 11"')
    monkeypatch.setenv("BENCHLEDGER_BASIC_MEMORY_DIR", str(tmp_path / "bm"))
    code = main(["run", "--platform", "basic-memory", "--basic-memory-python", str(old),
                 "--ledger", str(tmp_path / "l.sqlite")])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "needs Python >= 3.12" in err
    store = open_store(str(tmp_path / "l.sqlite"))
    try:
        assert store.run_ids() == [], "nothing is written"
    finally:
        store.close()


def test_a_server_command_needs_the_basic_memory_platform(capsys):
    assert main(["run", "--basic-memory-cmd", "basic-memory"]) == 2
    assert "use it with --platform basic-memory" in capsys.readouterr().err


def test_the_disk_read_back_is_bounded_in_files_and_bytes_and_hashes_each_file_whole(tmp_path):
    """What the platform wrote is input we did not make: a huge note or a flood of notes is
    recorded in part, never read whole into the ledger."""
    from benchledger.harness.platforms import basic_memory as bm

    big = b"# big\n" + b"x" * (bm.MAX_TEXT * 2)
    (tmp_path / "big.md").write_bytes(big)
    (tmp_path / "huge.md").write_bytes(b"y" * (bm.MAX_FILE + 1))
    for n in range(bm.MAX_FILES + 5):
        (tmp_path / f"n{n:04d}.md").write_text(f"note {n}\n")
    read = bm.read_files(str(tmp_path), "bench-agent-001")
    files = read.body["files"]
    assert len(files) == bm.MAX_FILES
    first = files[0]
    assert first["path"] == "big.md"
    assert first["sha256"] == hashlib.sha256(big).hexdigest()  # the whole file, as read_note's
    assert len(first["text"]) == bm.MAX_TEXT and first["text_cut"] is True
    assert not any(f["path"] == "huge.md" for f in files)
    assert read.body["skipped"] == 7  # the 16 MiB file, and six notes over MAX_FILES
