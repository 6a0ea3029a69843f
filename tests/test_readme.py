"""The README stays true: its snippets run, and CI runs its test command."""

from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read(name: str) -> str:
    return open(os.path.join(ROOT, name), encoding="utf-8").read()


def _block(marker: str) -> str:
    m = re.search(re.escape(marker) + r"[^\n]*\n```\w+\n(.*?)```", _read("README.md"), re.S)
    assert m, marker
    return m.group(1)


def test_readme_opens_with_the_concepts_glossary():
    text = _read("README.md")
    concepts = text.index("## Concepts")
    assert concepts < text.index("## Quickstart")
    for term in ("stream", "link hash", "run root", "trace hash", "projection", "replay"):
        assert f"**{term}**" in text[concepts : text.index("## Quickstart")]


def test_quickstart_has_exactly_two_commands():
    quick = _read("README.md").split("## Quickstart")[1].split("\n## ")[0]
    commands = re.findall(r"```console\n(.*?)```", quick, re.S)
    assert len(commands) == 2
    assert all(len(c.strip().splitlines()) == 1 for c in commands)
    assert "benchledger" in commands[0] and "pytest" in commands[1]


def test_ci_runs_the_readme_test_command():
    ci = _read(".ci/run")
    assert "quickstart:test" in ci  # .ci/run extracts the command, it keeps no copy
    assert "pytest" not in ci  # no copy of the command that could drift
    assert "pytest" in _block("<!-- quickstart:test -->")


def test_readme_python_snippet_runs():
    exec(compile(_block("<!-- snippet:"), "README.md", "exec"), {"__name__": "readme"})


def test_documented_commands_exist_with_their_options():
    from benchledger.cli import build_parser

    parser = build_parser()
    for argv in (
        ["runs"],
        ["log", "r"],
        ["verify"],
        ["verify", "f.jsonl", "--root", "ab"],
        ["export", "r", "-o", "x.jsonl"],
        ["import", "x.jsonl"],
        ["bench", "ledger", "--events", "10", "--backend", "postgres", "--json"],
        ["run", "--k", "2", "--concurrency", "8", "--agent", "fake:0.3", "--resume", "r"],
        ["report", "a", "b", "--format", "html", "-o", "x.html"],
        ["compare", "a", "b", "--format", "markdown"],
        ["gate", "c", "--baseline", "b", "--tolerance", "0.1", "--strict"],
        ["audit", "r", "capture_rate", "--bundle", "out.jsonl"],
        ["import-peer", "mcp-data-platform", "r.json", "--transcripts", "d", "--run-id", "p"],
    ):
        parser.parse_args([*argv, "--ledger", "x.sqlite"] if argv[0] != "bench" else argv)


# The command table is docs/cli.md's (the README links it).
CLI_DOC = os.path.join("docs", "cli.md")


def test_every_command_in_the_cli_doc_table_exists():
    from benchledger.cli import build_parser

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    rows = re.findall(r"^\| `benchledger ([a-z][a-z-]*)(?: ([a-z]+))?", _read(CLI_DOC), re.M)
    assert len(rows) >= 15
    for name, action in rows:
        assert name in commands, name
        sub = commands[name]._subparsers
        if sub is not None and action:
            assert action in sub._group_actions[0].choices, (name, action)


def _parser_for(words: list[str]):
    """The (sub)parser a command table row's command words name."""
    from benchledger.cli import build_parser

    parser = build_parser()
    if not words or words[0].startswith("-"):
        return parser
    parser = parser._subparsers._group_actions[0].choices[words[0]]  # type: ignore[union-attr]
    sub = parser._subparsers
    if sub is not None and len(words) > 1 and words[1] in sub._group_actions[0].choices:
        parser = sub._group_actions[0].choices[words[1]]
    return parser


def test_every_flag_and_choice_in_the_cli_doc_table_is_in_the_commands_help():
    rows = re.findall(r"^\| `benchledger ([^`]+)` \|", _read(CLI_DOC), re.M)
    assert len(rows) >= 20
    for row in rows:
        words = row.replace("\\|", "|").replace("[", " ").replace("]", " ").split()
        parser = _parser_for(words)
        options = parser._option_string_actions
        for i, word in enumerate(words):
            if not re.fullmatch(r"--?[a-z][a-z-]*", word):
                continue
            assert word in options, f"{CLI_DOC} row `benchledger {row}`: {word} is not an option"
            choices = options[word].choices
            value = words[i + 1] if i + 1 < len(words) else ""
            if choices and re.fullmatch(r"[a-z|]+", value):
                assert set(value.split("|")) <= set(choices), (row, word, value)


def test_every_benchledger_command_in_the_readme_code_blocks_parses():
    import shlex

    from benchledger.cli import build_parser

    parser = build_parser()
    blocks = re.findall(r"```console\n(.*?)```", _read("README.md"), re.S)
    commands = [
        part.strip()
        for block in blocks
        for line in block.splitlines()
        for part in line.split("&&")
        if "benchledger " in part
    ]
    assert len(commands) >= 4
    for command in commands:
        words = [w for w in shlex.split(command) if not re.fullmatch(r"[A-Z_]+=\S*", w)]
        assert words[0] == "benchledger", command
        parser.parse_args(words[1:])  # an unknown option or choice exits 2


def test_the_main_job_is_the_benchmark_run():
    assert _block("<!-- quickstart:main -->").strip().endswith("benchledger run")


# -- every command of the README's code blocks runs ----------------------------------------------


def _block_commands(marker: str) -> list[tuple[dict[str, str], list[str]]]:
    """The ``benchledger`` commands of the block under ``marker``: (env assignments, argv)."""
    import shlex

    out = []
    for line in _block(marker).splitlines():
        words = shlex.split(line)
        env = dict(w.split("=", 1) for w in words if re.fullmatch(r"[A-Z_]+=\S*", w))
        argv = [w for w in words if not re.fullmatch(r"[A-Z_]+=\S*", w)]
        assert argv[0] == "benchledger", line
        out.append((env, argv[1:]))
    return out


def test_the_model_runs_in_the_readme_run_against_local_fake_providers(
    tmp_path, monkeypatch, capsys
):
    """Each README model command, as written, with the provider a loopback fake: Anthropic's
    through ``ANTHROPIC_BASE_URL`` (as the SDK reads it), the OpenAI-compatible one on the
    README's own 127.0.0.1:8000. Two protocols, into a temporary ledger."""
    import pytest

    from benchledger.cli import main
    from benchledger.refplatform.errors import PlatformError
    from benchledger.refplatform.server import LoopbackServer
    from tests.fakes.anthropic_api import FakeAnthropic
    from tests.fakes.openai_api import FakeOpenAI
    from tests.test_model_transports import brain_for, subset
    from tests.test_runner import metrics

    (a_env, a_argv), (_, o_argv) = _block_commands("<!-- model-runs -->")
    path = subset(tmp_path, ["bl-keystone-region", "bl-margin-region"])
    anthropic = FakeAnthropic(brain_for(path)).start()
    openai = FakeOpenAI(brain_for(path))
    try:
        openai._server = LoopbackServer(openai.app(), port=8000)
    except PlatformError:
        anthropic.stop()
        pytest.skip("port 8000, which the README's OpenAI-compatible command names, is taken")
    openai._server.start()
    try:
        for name, value in a_env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic.url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        for run_id, argv in (("readme-a", a_argv), ("readme-o", o_argv)):
            ledger = str(tmp_path / f"{run_id}.sqlite")
            args = [*argv, "--protocols", path, "--ledger", ledger, "--run-id", run_id]
            assert main(args) == 0, run_id
            assert metrics(ledger, run_id)["full_lifecycle"] == (2, 2)
        assert anthropic.answered > 0 and openai.answered > 0
    finally:
        anthropic.stop()
        openai.stop()


def test_every_figure_in_docs_performance_carries_its_date_and_the_command_that_measured_it():
    """Each figures table: a date in every measured column, and a console block above it
    (nearest first) holding a benchledger command that parses."""
    import itertools
    import shlex

    from benchledger.cli import build_parser

    parser = build_parser()
    lines = _read(os.path.join("docs", "performance.md")).splitlines()
    commands: list[str] = []
    in_block, tables = False, 0
    for number, line in enumerate(lines, 1):
        if line.startswith("```console"):
            in_block, commands = True, []
            continue
        if in_block:
            if line.startswith("```"):
                in_block = False
            elif "benchledger " in line:
                commands.append(line[line.index("benchledger ") :].strip())
            continue
        if not line.startswith("| figure"):
            continue
        tables += 1
        where = f"docs/performance.md:{number}"
        assert commands, f"{where}: no benchledger command above this table"
        for command in commands:
            # The command ends where the shell line goes on: `; done`, `| tail`, `> FILE`.
            lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            words = list(itertools.takewhile(lambda w: w[0] not in ";|&<>", lexer))
            try:
                parser.parse_args(words[1:])  # an unknown option exits 2
            except SystemExit as exit_:  # --version prints the version and exits 0
                assert exit_.code == 0, f"{where}: {command!r} does not parse"
        cells = [c.strip() for c in line.strip("|").split("|")][1:]
        measured = [c for c in cells if c != "target"]
        assert measured, where
        for cell in measured:
            assert re.search(r"\b20\d\d-\d\d-\d\d\b", cell), f"{where}: {cell!r} has no date"
    assert tables >= 6


def test_every_command_and_every_report_option_has_its_place_in_the_cli_doc_table():
    from benchledger.cli import GROUPS

    text = _read(CLI_DOC)
    rows = re.findall(r"^\| `benchledger ([^`]+)` \|", text, re.M)
    # A row's first cell may name several commands: `benchledger platforms [--json]`, `suites`.
    cells = re.findall(r"^\| (`benchledger .*?) \| ", text, re.M)
    named = {w for cell in cells for w in re.findall(r"`(?:benchledger )?([a-z][a-z-]*)", cell)}
    assert [c for _, commands in GROUPS for c, _ in commands if c not in named] == []
    report = next(r for r in rows if r.startswith("report "))
    compare = next(r for r in rows if r.startswith("compare "))
    ci = _parser_for(["report"])._option_string_actions["--ci"]
    assert f"--ci {'|'.join(ci.choices)}" in report.replace("\\|", "|")
    assert "--prices FILE" in report and "--prices FILE" in compare


def test_the_readme_stream_example_numbers_attempts_from_1_as_runs_do():
    snippet = _block("<!-- snippet:")
    assert re.search(r'new_stream\("demo/[a-z-]+/1"\)', snippet)
    assert "attempt=1" in snippet and "attempt=0" not in snippet


def test_the_readme_says_how_long_the_whole_test_suite_takes():
    assert re.search(r"whole test suite[^.]*takes about \d+ minutes", _read("README.md"))


def test_the_readme_is_an_orientation_and_the_command_table_lives_in_docs_cli_md():
    """What it is, the two commands, five common tasks, where to go next: read in five
    minutes (at most 1,500 words); each command's row is docs/cli.md's, which it links."""
    text = _read("README.md")
    heads = re.findall(r"^## (.+)$", text, re.M)
    assert heads == ["Concepts", "Quickstart", "Five common tasks", "Library", "Where to go next"]
    assert len(re.findall(r"^\*\*\d\. ", text, re.M)) == 5
    assert len(text.split()) <= 1500
    assert not re.search(r"^\| `benchledger ", text, re.M)
    assert "docs/cli.md" in text.split("## Five common tasks")[1].split("\n## ")[0]
