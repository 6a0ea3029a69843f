"""``--platform mcp:FILE``: a generic MCP memory server driven by a mapping file.

The loader, the answer reading, the Python check and the scripted agent's turns are
checked on their own (no server); the end-to-end runs start the real servers: the
shipped mcp-memory-service mapping (installed into ``$BENCHLEDGER_MCP_DIR`` when set,
else a temporary folder; skipped, saying why, when it cannot be installed) and a
mapping of @modelcontextprotocol/server-memory, whose verdicts must equal the
hand-written adapter's on the same protocols. Both are slow (real servers).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys

import msgspec
import pytest

from benchledger import protocols
from benchledger.cli import main
from benchledger.harness.agents import ScriptedAgent
from benchledger.harness.agents.base import Episode
from benchledger.harness.errors import PlatformStartFailed
from benchledger.harness.platforms import generic_install
from benchledger.harness.platforms.mcp_mapping import fill, load, parse
from benchledger.harness.platforms.platform import resolve
from benchledger.harness.prompts import SYSTEM
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.errors import UnusableInput
from benchledger.ledger.events import GraderDecisionEvent, RunStartedEvent
from benchledger.running import config
from tests.conftest import interrupted_after
from tests.test_runner import subset

SHIPPED = os.path.join("harness", "platforms", "mappings", "mcp-memory-service.toml")
BY_ID = protocols.load(protocols.LIFECYCLE_DIR).by_id()
SUBSET = [
    "bl-anchor-tier", "bl-whale-orders", "bl-core-cohort", "bl-dormant-customers",
    "bl-audit-channel", "bl-focus-region",
]  # fmt: skip

GOOD = """\
name = "toy"
[server]
command = "toy-server"
args = ["serve", "--db", "{data}/db"]
secrets = ["TOY_TOKEN"]
[server.env]
TOY_HOME = "{data}"
[identities]
separate = "argument"
argument = "agent"
tools = ["put", "find", "list"]
[write]
tool = "put"
arguments = { text = "{fact}", topic = "{title}" }
[search]
tool = "find"
arguments = { q = "{query}", n = "{k}" }
[readback]
tool = "list"
path = "items"
id_field = "id"
text_field = "text"
[correction]
mode = "delete"
tool = "drop"
arguments = { id = "{id}" }
[shared]
separate = "process"
"""


def _swap(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new, 1)


# (id, mapping text, the key the refusal must name, a word of the problem)
BROKEN = [
    ("not-toml", "name = ", "not TOML", "TOML"),
    ("unknown-top-key", GOOD + "colour = 1\n", "colour", "unknown key"),
    ("no-name", _swap('name = "toy"\n', ""), "name", "missing"),
    ("bad-name", _swap('"toy"', '"Toy Server!"'), "name", "lower-case"),
    ("no-server", _swap('[server]\ncommand = "toy-server"\n', "[serverx]\n"), "serverx",
     "unknown key"),
    ("no-command", _swap('command = "toy-server"\n', ""), "server.command", "missing"),
    ("args-not-strings", _swap('args = ["serve"', 'args = [1'), "server.args", "list"),
    ("args-placeholder", _swap('"{data}/db"', '"{fact}"'), "server.args", "placeholder"),
    ("env-not-string", _swap('TOY_HOME = "{data}"', "TOY_HOME = 3"), "server.env", "strings"),
    ("env-bad-name", _swap("TOY_HOME =", '"TOY HOME" ='), "server.env.TOY HOME",
     "environment variable"),
    ("secret-with-value", _swap('TOY_HOME = "{data}"', 'TOY_TOKEN = "s3cr3t"'),
     "server.env.TOY_TOKEN", "secret"),
    ("secret-bad-name", _swap('"TOY_TOKEN"]', '"9X"]'), "server.secrets", "environment"),
    ("server-unknown-key", _swap("[server.env]", "port = 1\n[server.env]"), "server.port",
     "unknown key"),
    ("install-no-pip", GOOD + "[install]\npython = []\n", "install.pip", "missing"),
    ("install-unpinned", GOOD + '[install]\npip = "toy"\n', "install.pip", "pin"),
    ("install-python", GOOD + '[install]\npip = "toy==1.0.0"\npython = ["fast"]\n',
     "install.python", ">=3.N"),
    ("install-command-path", _swap('"toy-server"', '"/opt/toy"') + '[install]\npip = "toy==1"\n',
     "server.command", "installed command"),
    ("identities-separate", _swap('separate = "argument"', 'separate = "tenant"'),
     "identities.separate", "process or argument"),
    ("identities-no-argument", _swap('argument = "agent"\n', ""), "identities.argument",
     "needs argument"),
    ("identities-tools-short", _swap('tools = ["put", "find", "list"]', 'tools = ["put"]'),
     "identities.tools", "write, search and read-back"),
    ("misspelt-write", _swap('[write]\ntool = "put"\n', "[writex]\n"), "writex", "unknown key"),
    ("no-write", _swap('[write]\ntool = "put"\n'
                       'arguments = { text = "{fact}", topic = "{title}" }\n', ""), "write",
     "missing"),
    ("write-no-tool", _swap('tool = "put"\n', ""), "write.tool", "missing"),
    ("write-bad-tool", _swap('tool = "put"', 'tool = "put it"'), "write.tool", "tool name"),
    ("write-no-fact", _swap('text = "{fact}"', 'text = "x"'), "write.arguments", "{fact}"),
    ("write-placeholder", _swap('topic = "{title}"', 'topic = "{query}"'),
     "write.arguments.topic", "placeholder"),
    ("write-arguments-not-table", _swap('arguments = { text = "{fact}", topic = "{title}" }',
                                        'arguments = "x {fact}"'), "write.arguments", "table"),
    ("search-no-query", _swap('q = "{query}"', 'q = "all"'), "search.arguments", "{query}"),
    ("search-placeholder", _swap('n = "{k}"', 'n = "{id}"'), "search.arguments.n",
     "placeholder"),
    ("no-readback", _swap('[readback]\ntool = "list"\n', "[readbackx]\n"), "readbackx",
     "unknown key"),
    ("readback-no-tool", _swap('tool = "list"\n', ""), "readback.tool", "missing"),
    ("readback-bad-pattern", _swap('id_field = "id"', 'id_pattern = "("'),
     "readback.id_pattern", "regular expression"),
    ("readback-pattern-groups", _swap('id_field = "id"', 'id_pattern = "x"'),
     "readback.id_pattern", "one group"),
    ("readback-empty-path", _swap('path = "items"', 'path = ""'), "readback.path", "non-empty"),
    ("correction-no-mode", _swap('mode = "delete"\n', ""), "correction.mode", "missing"),
    ("correction-bad-mode", _swap('mode = "delete"', 'mode = "rewrite"'), "correction.mode",
     "update"),
    ("correction-names-nothing", _swap('id = "{id}"', 'id = "x"'), "correction.arguments",
     "{id} or {old}"),
    ("correction-update-no-fact", _swap('mode = "delete"', 'mode = "update"'),
     "correction.arguments", "{fact}"),
    ("shared-not-process", _swap('[shared]\nseparate = "process"', '[shared]\nseparate = "x"'),
     "shared.separate", "process"),
    ("url-and-command", _swap("[server.env]", 'url = "http://127.0.0.1:1/mcp"\n[server.env]'),
     "server.url", "not both"),
    ("url-with-credentials", _swap('command = "toy-server"\nargs = ["serve", "--db", "{data}/db"]\n'
                                   'secrets = ["TOY_TOKEN"]\n[server.env]\nTOY_HOME = "{data}"\n',
                                   'url = "http://me:pw@host/mcp"\n'), "server.url", "credentials"),
    ("url-with-args", _swap('command = "toy-server"', 'url = "http://127.0.0.1:1/mcp"'),
     "server.url", "no args"),
    ("shared-identity-missing", _swap('separate = "process"', 'separate = "argument"'),
     "shared.identity", "missing"),
    ("shared-identity-with-process", _swap('[shared]\nseparate = "process"',
                                           '[shared]\nseparate = "process"\nidentity = "s"'),
     "shared.identity", "only with"),
    ("shared-no-separate", _swap('separate = "process"', 'other = 1'), "shared.other",
     "unknown key"),
    ("exposed-without-identity", 'expose = ["stats"]\n' + GOOD, "expose",
     "stats gets no identity"),
    ("correction-unchecked", _swap('arguments = { id = "{id}" }', 'arguments = { was = "{old}" }'),
     "correction.tool", "drop gets no identity"),
    ("search-hits-two-ways", _swap('n = "{k}" }', 'n = "{k}" }\nhits = { path = "a", line = "b" }'),
     "search.hits", "one of path"),
    ("search-hits-id-groups", _swap('n = "{k}" }', 'n = "{k}" }\nhits = { line = "x", id = "y" }'),
     "search.hits.id", "one group"),
    ("install-npm-with-python", GOOD + '[install]\nnpm = "toy@1.0.0"\npython = [">=3.10"]\n',
     "install.python", "only with install.pip"),
    ("hits-not-path-or-table", _swap('n = "{k}" }', 'n = "{k}" }\nhits = 3'), "search.hits",
     "a JSON path or a table, not int"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "key", "word"), [b[1:] for b in BROKEN],
                         ids=[b[0] for b in BROKEN])  # fmt: skip
def test_a_broken_mapping_is_refused_in_one_line_naming_the_file_and_the_key(text, key, word):
    with pytest.raises(UnusableInput) as caught:
        parse(text, "maps/toy.toml")
    said = str(caught.value)
    assert "\n" not in said
    assert said.startswith("maps/toy.toml: ")
    assert key in said
    assert word in said


def test_the_good_mapping_and_the_shipped_one_load():
    toy = parse(GOOD, "toy.toml")
    assert (toy.separate, toy.needs_id, toy.shared) == ("argument", True, True)
    assert toy.secrets == ("TOY_TOKEN",) and "TOY_TOKEN" not in toy.text.split("[server.env]")[1]
    # An empty optional table is taken as absent, as it always was (recorded runs replay).
    empty = parse(_swap('mode = "delete"\ntool = "drop"\narguments = { id = "{id}" }\n', "")
                  .replace('separate = "process"', "") + "[install]\n", "toy.toml")  # fmt: skip
    assert (empty.pip, empty.npm, empty.correction, empty.shared) == ("", "", None, False)
    shipped = load(SHIPPED)
    assert shipped.pip == "mcp-memory-service==12.4.0"
    assert "sqlite-extensions" in shipped.python


def test_a_mapping_declares_its_vocabulary_for_the_model_free_agents():
    m = load(SHIPPED)
    vocab = m.vocabulary()
    assert vocab.lifecycle == m and vocab.expose == m.tools
    assert vocab.write_call("c", "a fact", "D1:3").arguments == {
        "content": "a fact", "conversation_id": "D1:3"
    }  # fmt: skip
    assert vocab.search_call("c", "q", 7).arguments == {"query": "q", "limit": 7}


def test_a_lone_placeholder_keeps_its_type_and_others_are_text():
    assert fill({"n": "{k}", "s": "top {k}", "l": ["{k}"]}, k=5) == {"n": 5, "s": "top 5",
                                                                     "l": [5]}  # fmt: skip


def test_memories_are_read_at_the_path_in_each_part_of_a_fanned_out_answer():
    m = parse(GOOD, "toy.toml")
    own = '{"items": [{"id": "a1", "text": "fact one", "meta": [{"q": 1}]}]}'
    assert m.memories(own) == [("a1", "fact one")]
    both = '[{"items": [{"id": "a1", "text": "one"}]}, {"items": [{"id": "b2", "text": "two"}]}]'
    assert m.memories(both) == [("a1", "one"), ("b2", "two")]


def test_a_text_answer_is_split_and_its_ids_found_by_the_pattern():
    m = parse(_swap('id_field = "id"', 'id_pattern = "Hash: (\\\\w+)"\nhit_separator = "\\n\\n"'),
              "toy.toml")  # fmt: skip
    text = "Found 2\n\n1. fact one\n   Hash: aa11\n\n2. fact two\n   Hash: bb22"
    assert [i for i, _ in m.memories(text)][1:] == ["aa11", "bb22"]


def test_a_missing_mapping_file_is_refused_by_the_command_line_before_anything_is_written(
    tmp_path, capsys
):
    ledger = tmp_path / "l.sqlite"
    broken = tmp_path / "broken.toml"
    broken.write_text(_swap('tool = "put"\n', ""))
    for path, key in ((broken, "write.tool"), (tmp_path / "absent.toml", "cannot read")):
        code = main(["run", "--platform", f"mcp:{path}", "--ledger", str(ledger)])
        err = capsys.readouterr().err.strip()
        assert code == 2
        assert len(err.splitlines()) == 1 and str(path) in err and key in err
    assert not ledger.exists()


def test_mcp_names_a_platform_like_any_other():
    platform, spec = resolve(f"mcp:{SHIPPED}")
    assert (platform.name, spec.kind, spec.url) == ("mcp", "mcp", f"mcp:{SHIPPED}")
    assert platform.replay and "--mcp-python" in [o.flag for o in platform.options]


def test_a_shipped_mapping_is_named_by_its_name_from_anywhere(tmp_path, monkeypatch, capsys):
    by_path = load(SHIPPED)
    monkeypatch.chdir(tmp_path)  # not the repository root: the name finds the package's file
    platform, spec = resolve("mcp:mcp-memory-service")
    assert (platform.name, spec.url) == ("mcp", "mcp:mcp-memory-service")
    assert load("mcp-memory-service").sha == by_path.sha
    ledger = tmp_path / "l.sqlite"
    assert main(["run", "--platform", "mcp:no-such-server", "--ledger", str(ledger)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "mcp:no-such-server" in err
    assert "shipped: mcp-memory-service" in err
    assert not ledger.exists()


def _fake_python(tmp_path, name: str, said: str) -> str:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\necho '{said}'\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_a_python_without_loadable_sqlite_extensions_is_refused_in_one_line(tmp_path):
    lacking = _fake_python(tmp_path, "py", '{"version": [3, 11], "sqlite_extensions": false}')
    with pytest.raises(PlatformStartFailed) as caught:
        generic_install.find_python((">=3.10", "sqlite-extensions"), lacking)
    assert "cannot load SQLite extensions" in str(caught.value)
    assert "\n" not in str(caught.value)
    old = _fake_python(tmp_path, "old", '{"version": [3, 9], "sqlite_extensions": true}')
    assert "not >=3.10" in generic_install.lacks(generic_install.probe(old), (">=3.10",))
    bare = _fake_python(tmp_path, "bare", '{"version": [3, 12], "sqlite_extensions": true, '
                        '"venv": false}')  # fmt: skip
    assert "virtual environments" in generic_install.lacks(generic_install.probe(bare), ())
    fits = _fake_python(tmp_path, "ok", '{"version": [3, 12], "sqlite_extensions": true}')
    assert generic_install.find_python((">=3.10", "sqlite-extensions"), fits) == fits


def _episode(pid: str, stage: str) -> Episode:
    return Episode(stage, SYSTEM[stage], "prompt", BY_ID[pid], 15, load(SHIPPED).vocabulary())


def test_the_scripted_agent_corrects_a_mapped_memory_by_reading_its_id_deleting_and_writing():
    m = load(SHIPPED)
    p = BY_ID["bl-audit-channel"]
    assert p.update is not None
    tools = ["memory_store", "memory_search", "memory_list", "memory_delete"]
    agent = ScriptedAgent()
    first = agent.decide(_episode(p.id, "update"), [], tools).tool_calls[0]
    assert first.name == "memory_list"
    listing = json.dumps({"memories": [{"content": p.fact, "content_hash": "h1"},
                                        {"content": "else", "content_hash": "h2"}]})  # fmt: skip
    said = [{"role": "tool", "text": listing}]
    second = agent.decide(_episode(p.id, "update"), said, tools).tool_calls[0]
    assert (second.name, second.arguments) == ("memory_delete", {"content_hash": "h1"})
    said.append({"role": "tool", "text": "Deleted 1 memories"})
    third = agent.decide(_episode(p.id, "update"), said, tools).tool_calls[0]
    assert third.name == m.write.tool and third.arguments["content"] == p.update.fact


def test_the_scripted_agent_answers_a_mapped_question_only_when_the_fact_surfaced():
    load(SHIPPED)
    p = BY_ID["bl-anchor-tier"]
    tools = ["memory_store", "memory_search", "memory_list"]
    agent = ScriptedAgent()
    ask = agent.decide(_episode(p.id, "recall"), [], tools).tool_calls[0]
    assert ask.name == "memory_search" and ask.arguments["limit"] == 10
    hit = agent.decide(_episode(p.id, "recall"), [{"role": "tool", "text": p.fact}], tools)
    miss = agent.decide(_episode(p.id, "recall"), [{"role": "tool", "text": "other"}], tools)
    assert "INSUFFICIENT" not in hit.text and "INSUFFICIENT" in miss.text


# -- real servers -------------------------------------------------------------------------


@pytest.fixture(scope="session")
def mcp_dir(tmp_path_factory) -> str:
    """mcp-memory-service installed for this session (skipped, saying why, when it cannot)."""
    folder = os.environ.get("BENCHLEDGER_MCP_DIR") or str(tmp_path_factory.mktemp("mcp"))
    try:
        generic_install.install(load(SHIPPED), folder)
    except PlatformStartFailed as exc:
        pytest.skip(f"mcp-memory-service cannot be installed here: {exc}")
    return folder


def _decisions(ledger: str, run_id: str) -> dict[tuple[str, str, str], object]:
    store = open_store(ledger)
    try:
        found = {}
        for e, _ in Ledger(store).events(run_id):
            if isinstance(e, GraderDecisionEvent):
                unit = e.stream.split("/")[1]
                found[(unit, e.body.stage, e.body.check)] = e.body.verdict
        return found
    finally:
        store.close()


@pytest.mark.slow
def test_the_shipped_mapping_runs_mcp_memory_service_to_a_run_that_replays_in_full(
    tmp_path, mcp_dir, monkeypatch, capsys
):
    monkeypatch.setenv("BENCHLEDGER_MCP_DIR", mcp_dir)
    ledger = str(tmp_path / "l.sqlite")
    path = subset(tmp_path, SUBSET)
    argv = ["run", "--platform", f"mcp:{SHIPPED}", "--protocols", path, "--ledger", ledger]
    assert main([*argv, "--run-id", "mms"]) == 0
    out = capsys.readouterr().out
    assert "full_lifecycle                         6/6" in out
    assert "promote in 2 unit(s)" in out  # the knowledge-page ones, said not applicable
    assert main(["verify", "mms", "--ledger", ledger]) == 0
    assert main(["replay", "mms", "--level", "rederive", "--ledger", ledger]) == 0
    assert main(["replay", "mms", "--level", "full", "--ledger", ledger]) == 0
    assert "compared 24 episodes, 6 units, 1 probe, all equal" in capsys.readouterr().out
    store = open_store(ledger)
    try:
        record = next(e.body.record for e, _ in Ledger(store).events("mms", "mms")
                      if isinstance(e, RunStartedEvent))  # fmt: skip
    finally:
        store.close()
    assert record is not None and record.platform.mapping == load(SHIPPED).text
    assert record.platform.mapping_hash == load(SHIPPED).sha


@pytest.mark.slow
def test_mcp_memory_service_runs_with_no_network_at_all(tmp_path, mcp_dir):
    """After the install, the run needs no network: in a network namespace of its own
    (not even loopback is up), the run completes."""
    if subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode != 0:
        pytest.skip("unshare -rn (a user and network namespace) is not available here")
    ledger = str(tmp_path / "l.sqlite")
    path = subset(tmp_path, SUBSET[:2])
    env = {**os.environ, "BENCHLEDGER_MCP_DIR": mcp_dir}
    cli = "import sys; from benchledger.cli import main; sys.exit(main(sys.argv[1:]))"
    cmd = ["unshare", "-rn", sys.executable, "-c", cli, "run", "--platform",
           f"mcp:{SHIPPED}", "--protocols", path, "--ledger", ledger]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-500:]
    assert "full_lifecycle                         2/2" in done.stdout


SERVER_MEMORY_MAPPING = """\
name = "server-memory-mapped"
[server]
command = "{node}"
args = ["{entry}"]
[server.env]
MEMORY_FILE_PATH = "{{data}}/memory.jsonl"
[identities]
separate = "process"
[write]
tool = "create_entities"
# One entity per memory: create_entities ignores a name that exists.
arguments.entities = [{{ name = "{{entity}} | {{fact}}", entityType = "dataset", \
observations = ["{{fact}}"] }}]
[search]
tool = "search_nodes"
arguments = {{ query = "{{query}}" }}
[readback]
tool = "read_graph"
path = "entities"
id_field = "name"
[correction]
mode = "delete"
tool = "delete_entities"
arguments = {{ entityNames = ["{{id}}"] }}
[shared]
separate = "process"
"""


@pytest.mark.slow
def test_a_mapped_server_memory_gives_the_hand_written_adapters_verdicts(
    tmp_path, monkeypatch, npm_dir
):
    from benchledger.harness.platforms.provision import (
        SERVER_MEMORY_VERSION,
        install_server_memory,
    )

    node = shutil.which("node")
    assert node is not None  # npm_dir skipped without it
    entry = install_server_memory(SERVER_MEMORY_VERSION, npm_dir)  # the session's install
    monkeypatch.setenv("BENCHLEDGER_NPM_DIR", npm_dir)
    mapping = tmp_path / "server-memory.toml"
    mapping.write_text(SERVER_MEMORY_MAPPING.format(node=node, entry=entry))
    ledger = str(tmp_path / "l.sqlite")
    path = subset(tmp_path, SUBSET)
    argv = ["run", "--protocols", path, "--ledger", ledger]
    assert main([*argv, "--platform", "server-memory", "--run-id", "hand"]) == 0
    assert main([*argv, "--platform", f"mcp:{mapping}", "--run-id", "mapped"]) == 0
    hand, mapped = _decisions(ledger, "hand"), _decisions(ledger, "mapped")
    assert hand and mapped == hand
    assert main(["replay", "mapped", "--level", "full", "--ledger", ledger]) == 0


PLATFORMS_DOC = os.path.join("docs", "platforms.md")


def _doc() -> str:
    with open(PLATFORMS_DOC, encoding="utf-8") as f:
        return f.read()


def test_the_worked_example_in_the_platforms_doc_is_a_mapping_the_loader_takes():
    block = re.search(r"### A worked example.*?```toml\n(.*?)```", _doc(), re.S)
    assert block is not None
    m = parse(block.group(1), "worked-example.toml")
    assert (m.name, m.separate, m.items_at, m.needs_id) == ("toy-memory", "process", "results",
                                                            True)  # fmt: skip


@pytest.mark.slow
def test_the_generic_mcp_command_in_the_platforms_doc_runs_the_suite_to_a_replayable_run(
    tmp_path, mcp_dir, monkeypatch, capsys
):
    block = re.search(r"<!-- generic-mcp -->\n```console\n(.*?)```", _doc(), re.S)
    assert block is not None
    argv = shlex.split(block.group(1).strip())
    assert argv[:2] == ["benchledger", "run"] and "--ledger" not in argv
    monkeypatch.setenv("BENCHLEDGER_MCP_DIR", mcp_dir)
    ledger = str(tmp_path / "l.sqlite")
    assert main([*argv[1:], "--ledger", ledger, "--run-id", "doc"]) == 0
    assert "full_lifecycle                       30/30" in capsys.readouterr().out
    assert main(["replay", "doc", "--level", "full", "--ledger", ledger]) == 0


ECHO_SERVER = """\
import os
from mcp.server.mcpserver import MCPServer

app = MCPServer("echo-memory")
kept: list[str] = []


@app.tool()
def put(text: str) -> str:
    kept.append(text)
    return "kept with token " + os.environ["ECHO_TOKEN"]


@app.tool()
def find(q: str) -> str:
    return "\\n".join(kept) + " token=" + os.environ["ECHO_TOKEN"]


app.run()
"""


def _echo_mapping(server) -> str:
    return f"""\
name = "echo"
[server]
command = "{sys.executable}"
args = ["{server}"]
secrets = ["ECHO_TOKEN"]
[write]
tool = "put"
arguments = {{ text = "{{fact}}" }}
[search]
tool = "find"
arguments = {{ q = "{{query}}" }}
[readback]
tool = "find"
arguments = {{ q = "{{fact}}" }}
"""


def test_a_secret_the_server_echoes_never_reaches_the_ledger(tmp_path, monkeypatch, capsys):
    """A variable named secret reaches the server from the environment; its value, echoed
    back in every answer, is scrubbed before the agent, the checks or the ledger see it."""
    pytest.importorskip("mcp.server.mcpserver")
    server = tmp_path / "echo_server.py"
    server.write_text(ECHO_SERVER)
    mapping = tmp_path / "echo.toml"
    mapping.write_text(_echo_mapping(server))
    token = "tok-" + "9f3a" * 6
    monkeypatch.setenv("ECHO_TOKEN", token)
    ledger = tmp_path / "l.sqlite"
    path = subset(tmp_path, ["bl-audit-channel"])  # taught, then corrected
    argv = ["run", "--platform", f"mcp:{mapping}", "--protocols", path, "--ledger", str(ledger)]
    assert main([*argv, "--run-id", "echo"]) == 0
    out = capsys.readouterr()
    assert "capture_rate                           1/1" in out.out
    assert "update in 1 unit(s): the mapping names no correction" in out.out
    stored = b"".join(f.read_bytes() for f in tmp_path.glob("l.sqlite*"))  # with its WAL
    assert b"<redacted>" in stored and token.encode() not in stored
    assert token not in out.out + out.err


HTTP_SERVER = """\
import itertools
import json
import sys
from mcp.server.mcpserver import MCPServer

app = MCPServer("agents-memory")
kept: dict[str, dict[str, str]] = {}
made = itertools.count()


@app.tool()
def put(text: str, agent: str = "anyone") -> str:
    kept.setdefault(agent, {})[f"m{next(made)}"] = text
    return "kept"


@app.tool()
def find(q: str, agent: str = "anyone") -> str:
    items = [{"id": k, "text": v} for k, v in kept.get(agent, {}).items()]
    return json.dumps({"items": items})


@app.tool()
def drop(ref: str, agent: str = "anyone") -> str:
    kept.get(agent, {}).pop(ref, None)
    return "dropped"


app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
"""


def test_a_server_at_a_url_with_identities_and_shared_knowledge_as_arguments_runs_and_replays(
    tmp_path, capsys
):
    """One streamable-HTTP server on loopback: each identity, and the shared knowledge,
    is an ``agent`` argument the harness puts in; the run verifies and replays in full."""
    pytest.importorskip("mcp.server.mcpserver")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = tmp_path / "http_server.py"
    server.write_text(HTTP_SERVER)
    proc = subprocess.Popen([sys.executable, str(server), str(port)], stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True)  # fmt: skip
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # the server says when it listens
            if "running on" in line.lower():
                break
        mapping = tmp_path / "agents.toml"
        mapping.write_text(f"""\
name = "agents-memory"
[server]
url = "http://127.0.0.1:{port}/mcp"
[identities]
separate = "argument"
argument = "agent"
tools = ["put", "find", "drop"]
[write]
tool = "put"
arguments = {{ text = "{{fact}}" }}
[search]
tool = "find"
arguments = {{ q = "{{query}}" }}
hits = {{ path = "items", id_field = "id", text_field = "text" }}
[readback]
tool = "find"
arguments = {{ q = "" }}
path = "items"
id_field = "id"
text_field = "text"
[correction]
mode = "delete"
tool = "drop"
arguments = {{ ref = "{{id}}" }}
[shared]
separate = "argument"
identity = "shared-knowledge"
""")
        ledger = str(tmp_path / "l.sqlite")
        path = subset(tmp_path, ["bl-audit-channel", "bl-whale-orders"])
        argv = ["run", "--platform", f"mcp:{mapping}", "--protocols", path, "--ledger", ledger]
        assert main([*argv, "--run-id", "url", "--concurrency", "1"]) == 0
        assert "full_lifecycle                         2/2" in capsys.readouterr().out
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert main(["replay", "url", "--level", "full", "--ledger", ledger]) == 0
    assert "all equal" in capsys.readouterr().out
    # Its search tool and hits are the mapping's (search.hits: each hit with its id, so the
    # probe finds retrieval measurable), recorded in each episode: the lifecycle's
    # ranking reads them there: every searched fact is among the first five hits.
    assert main(["report", "url", "--format", "json", "--ledger", ledger]) == 0
    metrics = json.loads(capsys.readouterr().out)["metrics"]
    assert (metrics["recall_at_5"]["num"], metrics["recall_at_5"]["den"]) == (4, 4)


def test_a_resume_after_the_mapping_changed_is_refused_naming_the_change(tmp_path, capsys):
    """A run records its mapping's hash; resuming it with a changed file is refused (the
    echo server run is interrupted after its first unit, then the mapping is edited)."""
    pytest.importorskip("mcp.server.mcpserver")
    server = tmp_path / "echo_server.py"
    server.write_text(ECHO_SERVER)
    mapping = tmp_path / "echo.toml"
    text = _echo_mapping(server)
    mapping.write_text(text)
    ledger = str(tmp_path / "l.sqlite")
    path = subset(tmp_path, SUBSET[:2])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ECHO_TOKEN", "tok-" + "1b2c" * 6)
        cfg = config(platform=f"mcp:{mapping}", protocols=path, run_id="r", concurrency=1)
        store = open_store(ledger)
        try:
            interrupted_after(Ledger(store), cfg, 1)
        finally:
            store.close()
        mapping.write_text(text.replace('name = "echo"', 'name = "echo-2"'))
        code = main(["run", "--resume", "r", "--ledger", ledger])
    err = capsys.readouterr().err
    assert code == 2 and "the mapping changed since the run started" in err


# -- patterns from a mapping cannot hang a reader (issue 50, item 4; the republished bundle
# holding a catastrophic one is in the attack corpus, tests/test_attacks_public.py) ------


def test_a_mapping_pattern_outside_the_linear_time_language_is_refused_at_load():
    search = 'arguments = { q = "{query}", n = "{k}" }'
    for key, text in (
        ("readback.hit_separator", _swap('id_field = "id"', 'hit_separator = "(a)\\\\1"')),
        ("readback.id_pattern", _swap('id_field = "id"', 'id_pattern = "(?=a)(a)"')),
        ("search.hits.line", _swap(search, search + '\nhits = { line = "(?<=x)a" }')),
    ):
        with pytest.raises(UnusableInput) as caught:
            parse(text, "maps/toy.toml")
        assert key in str(caught.value) and "not supported" in str(caught.value)


# -- isolation: every exposed tool keeps identities apart (issue 50, item 3) -----------------


@pytest.mark.slow
def test_a_second_identity_cannot_read_change_or_delete_the_firsts_memories_on_mcp_memory_service(
    tmp_path, mcp_dir
):
    """Identity 1 stores a private memory; identity 2 tries every tool it is shown and the
    ones the server has beyond them (the quality analysis, update and delete by the
    memory's content hash): it neither sees the memory nor changes it, and identity 1
    still reads it back unchanged."""
    import asyncio

    from benchledger.harness.platforms.generic_mcp import GenericMcp

    m = load(SHIPPED)
    exe = generic_install.install(m, mcp_dir)
    secret = "Identity one's private fact: the vault code is 4417"

    async def attempt() -> tuple[set[str], dict[str, tuple[bool, str]], list[str]]:
        async with GenericMcp.running(m, (exe, *m.args), dict(m.env), str(tmp_path),
                                      pool_size=2) as g, g.session(1) as one:  # fmt: skip
            stored = await one.call_tool("memory_store", {"content": secret,
                                                          "conversation_id": "c1"})  # fmt: skip
            digest = re.search(r"hash: ([0-9a-f]{64})", stored.text)
            assert digest is not None, stored.text
            h = digest.group(1)
            async with g.session(2) as two:
                shown = {t["name"] for t in await two.list_tools()}
                tries = {
                    "memory_search": {"query": "vault code", "limit": 10},
                    "memory_list": {"page_size": 100},
                    "memory_quality": {"action": "analyze"},
                    "memory_update": {"content_hash": h, "updates": {"content": "changed"}},
                    "memory_delete": {"content_hash": h},
                    "memory_store": {"content": "identity two's own", "conversation_id": "c2"},
                }
                got = {}
                for tool, args in tries.items():
                    r = await two.call_tool(tool, args)
                    got[tool] = (r.is_error, r.text)
            back = await one.call_tool("memory_list", {"page_size": 100})
            return shown, got, [s for _, s in m.memories(back.text)]

    shown, got, ones = asyncio.run(attempt())
    for tool, (_, text) in got.items():
        assert "4417" not in text, (tool, text)
    for tool in ("memory_quality", "memory_update", "memory_delete"):
        assert got[tool][0], (tool, got[tool])  # refused, never forwarded
    assert not got["memory_store"][0]
    assert any(secret in s for s in ones)
    assert shown == {"memory_store", "memory_search", "memory_list", "memory_delete"}


LIST_SERVER = """\
import json
from mcp.server.mcpserver import MCPServer

app = MCPServer("list-memory")
kept: list[str] = []


@app.tool()
def put(text: str) -> str:
    kept.append(text)
    return "kept"


@app.tool()
def find(q: str) -> str:
    return json.dumps({"items": [{"id": str(i), "text": t} for i, t in enumerate(kept)]})


app.run()
"""


def _list_mapping(server, *, search_tool: str = "find", path: str = "items") -> str:
    return f"""\
name = "list-memory"
[server]
command = "{sys.executable}"
args = ["{server}"]
[write]
tool = "put"
arguments = {{ text = "{{fact}}" }}
[search]
tool = "{search_tool}"
arguments = {{ q = "{{query}}" }}
[readback]
tool = "find"
arguments = {{ q = "{{fact}}" }}
path = "{path}"
id_field = "id"
text_field = "text"
"""


@pytest.mark.parametrize(
    ("change", "key", "says"),
    [({"search_tool": "fnd"}, "search.tool", "did you mean find?"),
     ({"path": "memories"}, "readback.path", "no array at 'memories' (its keys there: items)")],
    ids=["tool-name-typo", "wrong-readback-path"],
)  # fmt: skip
def test_a_mapping_that_does_not_fit_its_server_is_refused_before_the_run_naming_the_key(
    tmp_path, capsys, change, key, says
):
    """A tool name the server does not list, or a read-back path its answer does not have,
    is the mapping's mistake: one line naming the file and the key, exit 2, nothing
    written (not a unit failing as "no pending insight", nor advice about pool keys)."""
    pytest.importorskip("mcp.server.mcpserver")
    server = tmp_path / "list_server.py"
    server.write_text(LIST_SERVER)
    mapping = tmp_path / "list.toml"
    mapping.write_text(_list_mapping(server, **change))
    ledger = tmp_path / "l.sqlite"
    path = subset(tmp_path, ["bl-audit-channel"])
    argv = ["run", "--platform", f"mcp:{mapping}", "--protocols", path, "--ledger", str(ledger)]
    code = main([*argv, "--run-id", "fit"])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and str(mapping) in err
    assert f"{key}: " in err and says in err
    assert "--pool-base" not in err and "--admin-key" not in err
    assert main(["runs", "--ledger", str(ledger)]) in (0, 2)
    assert "fit" not in capsys.readouterr().out


# -- install.npm: a server from npm, found by name (issue 49, item 5) ------------------------


def test_an_npm_install_must_be_one_package_pinned_exactly():
    for npm, word in (("left-pad", "pin one package"), ("left-pad@^1.0.0", "pin one package"),
                      ("a@1.0.0 b@2.0.0", "pin one package")):  # fmt: skip
        with pytest.raises(UnusableInput) as caught:
            parse(GOOD + f'[install]\nnpm = "{npm}"\n', "maps/toy.toml")
        assert "install.npm" in str(caught.value) and word in str(caught.value)
    with pytest.raises(UnusableInput, match="not both"):
        parse(GOOD + '[install]\nnpm = "toy@1.0.0"\npip = "toy==1.0.0"\n', "maps/toy.toml")
    m = parse(GOOD + '[install]\nnpm = "@scope/toy-server@1.2.3"\n', "maps/toy.toml")
    assert (m.npm, m.pip) == ("@scope/toy-server@1.2.3", "")


@pytest.mark.slow
def test_a_mapping_installing_its_server_from_npm_runs_with_no_machine_path_in_the_run(
    tmp_path, monkeypatch
):
    """server-memory's npm package, named in the mapping as NAME@VERSION and its command by
    name: installed under the install folder on first use, the run seals, and nothing in
    its record names a folder of this machine."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("install.npm needs Node.js and npm on PATH")
    from benchledger.harness.platforms.server_memory import VERSION

    folder = tmp_path / "installs"
    monkeypatch.setenv("BENCHLEDGER_MCP_DIR", str(folder))
    body = SERVER_MEMORY_MAPPING.split("[identities]", 1)[1].replace("{{", "{").replace("}}", "}")
    mapping = tmp_path / "from-npm.toml"
    head = (f'name = "server-memory-npm"\n[install]\n'
            f'npm = "@modelcontextprotocol/server-memory@{VERSION}"\n'
            '[server]\ncommand = "mcp-server-memory"\n[server.env]\n'
            'MEMORY_FILE_PATH = "{data}/memory.jsonl"\n')  # fmt: skip
    mapping.write_text(head + "[identities]" + body)
    ledger = str(tmp_path / "l.sqlite")
    path = subset(tmp_path, SUBSET[:2])
    argv = ["run", "--platform", f"mcp:{mapping}", "--protocols", path, "--ledger", ledger]
    code = main([*argv, "--run-id", "npm"])
    if code != 0:
        package = f"@modelcontextprotocol/server-memory@{VERSION}"
        view = [shutil.which("npm") or "npm", "view", package]
        if subprocess.run(view, capture_output=True, timeout=120).returncode != 0:
            pytest.skip("the npm registry cannot be reached here")
    assert code == 0
    store = open_store(ledger)
    try:
        started = next(e for e, _ in Ledger(store).events("npm", "npm")
                       if isinstance(e, RunStartedEvent))  # fmt: skip
    finally:
        store.close()
    said = json.dumps(msgspec.to_builtins(started.body))
    assert str(folder) not in said and "node_modules" not in said
    assert started.body.record is not None
    assert "mcp-server-memory" in started.body.record.platform.mapping


KEYED_SERVER = """\
import json
from mcp.server.mcpserver import MCPServer

app = MCPServer("keyed-memory")
kept: dict[str, str] = {}


@app.tool()
def save(key: str, value: str) -> str:
    kept[key] = value  # one value per key: a save under a key replaces it
    return "saved " + key


@app.tool()
def items(q: str) -> str:
    return json.dumps({"items": [{"key": k, "value": v} for k, v in kept.items()]})


app.run()
"""


def test_a_correction_that_replaces_by_key_without_naming_the_original_is_measured(
    tmp_path, capsys
):
    """A server keeping one value per key corrects by saving under the same key: the
    mapping's correction names the key ({title}) and neither {id} nor {old}, loads, sends
    the key (never the literal placeholder), and the update counts as captured with the
    original gone."""
    pytest.importorskip("mcp.server.mcpserver")
    server = tmp_path / "keyed_server.py"
    server.write_text(KEYED_SERVER)
    mapping = tmp_path / "keyed.toml"
    mapping.write_text(
        f"""\
name = "keyed-memory"
[server]
command = "{sys.executable}"
args = ["{server}"]
[write]
tool = "save"
arguments = {{ key = "{{title}}", value = "{{fact}}" }}
[search]
tool = "items"
arguments = {{ q = "{{query}}" }}
search.hits = "items"
[readback]
tool = "items"
arguments = {{ q = "{{fact}}" }}
path = "items"
id_field = "key"
text_field = "value"
[correction]
mode = "update"
tool = "save"
arguments = {{ key = "{{title}}", value = "{{fact}}" }}
""".replace("search.hits", "hits")
    )
    ledger = str(tmp_path / "l.sqlite")
    path = subset(tmp_path, ["bl-audit-channel"])  # taught, then corrected
    argv = ["run", "--platform", f"mcp:{mapping}", "--protocols", path, "--ledger", ledger]
    assert main([*argv, "--run-id", "keyed"]) == 0
    out = capsys.readouterr().out
    found = _decisions(ledger, "keyed")
    updates = {check: v for (_, stage, check), v in found.items() if stage == "update"}
    assert updates == {"update_captured": True, "duplicated": False}, out
    store = open_store(ledger)
    try:
        calls = [e.body for e, _ in Ledger(store).events("keyed")
                 if type(e).__name__ == "SessionCallEvent" and e.body.tool == "save"]  # fmt: skip
        record = next(e.body.record for e, _ in Ledger(store).events("keyed", "keyed")
                      if isinstance(e, RunStartedEvent))  # fmt: skip
    finally:
        store.close()
    sent = json.dumps([c.arguments for c in calls])
    assert calls and "{title}" not in sent and "{fact}" not in sent
    assert record is not None and record.platform.mapping_name == "keyed-memory"
    assert record.platform.hits is not None and record.platform.hits.path == "items"


def test_every_placeholder_a_correction_or_read_back_may_hold_is_filled_never_sent_literally():
    m = parse(_swap('arguments = { id = "{id}" }',
                    'arguments = { id = "{id}", topic = "{title}", about = "{entity}", '
                    'was = "{old}", now = "{fact}" }'), "toy.toml")  # fmt: skip
    got = m.fill_correction(id="m7", old="the old fact", fact="the new fact", entity="orders")
    assert got == {"id": "m7", "topic": "orders", "about": "orders", "was": "the old fact",
                   "now": "the new fact"}  # fmt: skip
    rb = parse(_swap("[readback]\ntool = \"list\"\n",
                     '[readback]\ntool = "list"\narguments = { q = "{fact}", t = "{title}" }\n'),
               "toy.toml")  # fmt: skip
    assert rb.fill_readback(fact="f", entity="orders") == {"q": "f", "t": "orders"}


MMS_SEARCH = (
    "Found 2 memories (mode: semantic) for query: 'vault code'\n\n"
    "1. [D1:3 | 8 May 2023] Mira: the vault code is 4417\n"
    "   Hash: " + "a" * 64 + "\n   Created: 2026-12-07T18:33:36.100414Z [untagged]\n\n"
    "2. [D2:1 | 9 May 2023] Tom: lunch was at noon\n"
    "   Hash: " + "b" * 64 + "\n   Created: 2026-12-07T18:33:36.110083Z [untagged]"
)  # what mcp-memory-service 12.4.0's memory_search answers (docs/mcp-memory-service.md)


def test_the_shipped_mapping_itemises_mcp_memory_services_text_search_answer_into_ranked_hits():
    from benchledger.projections.retrieval import hits, items

    rule = load(SHIPPED).hits
    assert rule is not None
    found = items(MMS_SEARCH, rule)
    assert [i for i, _ in found] == ["a" * 64, "b" * 64]
    assert "4417" in found[0][1] and "Found 2 memories" not in found[0][1]
    # A pool identity's search is answered by its own server and the shared one.
    both = json.dumps([MMS_SEARCH, "No memories found for query: 'vault code'"])
    assert len(hits(both, rule)) == 2 and hits(MMS_SEARCH) == [MMS_SEARCH]


def test_the_platforms_doc_defines_every_placeholder_the_loader_allows():
    from benchledger.harness.platforms.mcp_mapping import _ALLOWED, PLACEHOLDERS

    table = re.search(r"### Placeholders\n.*?\n\n(\| placeholder.*?)\n\n", _doc(), re.S)
    assert table is not None
    rows = {m.group(1) for m in re.finditer(r"^\| `\{(\w+)\}` \|", table.group(1), re.M)}
    allowed = {name for names in _ALLOWED.values() for name in names}
    assert rows == set(PLACEHOLDERS) == allowed


def test_locomo_retrieval_reads_a_mapped_servers_text_answer_as_its_ranked_memories():
    """The ask's search answered by mcp-memory-service (one text of numbered memories):
    with the run's recorded hit rule each memory is a hit with its own dialogue id, in
    rank order; without it the whole text is one hit, the first id alone."""
    from benchledger.ledger.events import EpisodeFinishedBody, SessionCallBody
    from benchledger.projections.suites.locomo.decisions import ASK, retrieved

    call = SessionCallBody(episode=ASK, method="tools/call", tool="memory_search",
                           content=[{"type": "text", "text": MMS_SEARCH}])  # fmt: skip
    ruled = EpisodeFinishedBody(episode=ASK, tool_calls=1, hits=load(SHIPPED).hits)
    assert retrieved([(1, call), (2, ruled)]) == (("D1:3", "D2:1"), (1,))
    unruled = EpisodeFinishedBody(episode=ASK, tool_calls=1)
    assert retrieved([(1, call), (2, unruled)]) == (("D1:3",), (1,))


SHARED_POOL_SERVER = """\
import itertools
import json
from mcp.server.mcpserver import MCPServer

app = MCPServer("pool-memory")
kept: dict[str, tuple[str, str]] = {}
made = itertools.count()


@app.tool()
def put(text: str, agent: str = "anyone") -> str:
    ref = f"m{next(made)}"
    kept[ref] = (agent, text)
    return "kept " + ref


@app.tool()
def find(q: str, agent: str = "anyone") -> str:
    return json.dumps({"items": [{"id": r, "text": t} for r, (a, t) in kept.items() if a == agent]})


@app.tool()
def drop(ref: str, everything: bool = False) -> str:
    if everything:
        kept.clear()
    kept.pop(ref, None)  # by id alone, whoever wrote it
    return "dropped " + ref


@app.tool()
def dump() -> str:
    return json.dumps(kept)  # every identity's memories


app.run()
"""


def test_on_a_shared_pool_server_a_tool_without_the_identity_is_hidden_or_checked(tmp_path):
    """One server holds every identity's memories: the tool that takes no identity and is
    not mapped (``dump``) is neither listed nor forwarded; the correction that takes none
    (``drop`` by id) is forwarded only for the caller's own memory and its own arguments."""
    pytest.importorskip("mcp.server.mcpserver")
    import asyncio

    from benchledger.harness.platforms.generic_mcp import GenericMcp

    server = tmp_path / "pool_server.py"
    server.write_text(SHARED_POOL_SERVER)
    m = parse(f"""\
name = "pool-memory"
[server]
command = "{sys.executable}"
args = ["{server}"]
[identities]
separate = "argument"
argument = "agent"
tools = ["put", "find"]
[write]
tool = "put"
arguments = {{ text = "{{fact}}" }}
[search]
tool = "find"
arguments = {{ q = "{{query}}" }}
[readback]
tool = "find"
arguments = {{ q = "" }}
path = "items"
id_field = "id"
text_field = "text"
[correction]
mode = "delete"
tool = "drop"
arguments = {{ ref = "{{id}}" }}
""", str(tmp_path / "pool.toml"))  # fmt: skip

    async def attempt() -> tuple[set[str], dict[str, tuple[bool, str]], list[str]]:
        async with GenericMcp.running(m, (m.command, *m.args), {}, str(tmp_path),
                                      pool_size=2) as g, g.session(1) as one:  # fmt: skip
            await one.call_tool("put", {"text": "one's private fact 4417"})
            await one.call_tool("put", {"text": "one's fact to drop"})
            async with g.session(2) as two:
                shown = {t["name"] for t in await two.list_tools()}
                got = {}
                for name, args in (("dump", {}), ("drop", {"ref": "m0"}),
                                   ("drop", {"ref": "m9", "everything": True})):  # fmt: skip
                    r = await two.call_tool(name, args)
                    got[f"{name}{sorted(args)}"] = (r.is_error, r.text)
            mine = await one.call_tool("drop", {"ref": "m1"})
            got["own drop"] = (mine.is_error, mine.text)
            back = await one.call_tool("find", {"q": ""})
            return shown, got, [s for _, s in m.memories(back.text)]

    shown, got, ones = asyncio.run(attempt())
    assert all(is_error and "4417" not in text for is_error, text in
               (got["dump[]"], got["drop['ref']"], got["drop['everything', 'ref']"]))  # fmt: skip
    assert got["own drop"] == (False, "dropped m1")
    assert ones == ["one's private fact 4417"]
    assert shown == {"put", "find", "drop"}


def test_the_retrieval_reader_answers_from_a_mapped_servers_memories_not_its_answers_header():
    """mcp-memory-service echoes the question in its answer's first line; the reader, which
    itemises the answer by the mapping's search.hits, answers from the memory."""
    from benchledger.harness.agents.base import Episode
    from benchledger.harness.agents.retrieval import RetrievalAgent
    from benchledger.projections.suites.locomo.items import LocomoItem
    from benchledger.protocols.locomo import Question, Sample

    vocabulary = load(SHIPPED).vocabulary()
    question = "What did Mira start?"
    text = ("Found 2 memories (mode: semantic) for query: 'What did Mira start?'\n\n"
            "1. [D1:1 | 9:00 am on 2 May, 2023] Mira: Hi Tom, how was your week?\n"
            "   Hash: " + "a" * 64 + "\n   Created: 2026-12-07T18:33:36Z [untagged]\n\n"
            "2. [D1:3 | 9:00 am on 2 May, 2023] Mira: I started pottery last week.\n"
            "   Hash: " + "b" * 64 + "\n   Created: 2026-12-07T18:33:36Z [untagged]")  # fmt: skip
    q = Question("c-1:q1", question, 4, "pottery", ("D1:3",))
    item = LocomoItem(q, Sample("c-1", "Mira", "Tom", (), (q,)))
    episode = Episode("ask", "", question, item, 6, vocabulary)
    messages = [{"role": "user", "text": question},
                {"role": "tool", "call_id": "c", "name": "memory_search", "text": text,
                 "is_error": False}]  # fmt: skip
    turn = RetrievalAgent().decide(episode, messages, ["memory_store", "memory_search",
                                                       "memory_list"])  # fmt: skip
    assert turn.text == "FINAL ANSWER: I started pottery last week."
