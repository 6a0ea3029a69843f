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
    from cli import build_parser

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


def test_every_command_in_the_readme_table_exists():
    from cli import build_parser

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    rows = re.findall(r"^\| `benchledger ([a-z][a-z-]*)(?: ([a-z]+))?", _read("README.md"), re.M)
    assert len(rows) >= 15
    for name, action in rows:
        assert name in commands, name
        sub = commands[name]._subparsers
        if sub is not None and action:
            assert action in sub._group_actions[0].choices, (name, action)


def _parser_for(words: list[str]):
    """The (sub)parser a README table row's command words name."""
    from cli import build_parser

    parser = build_parser()
    if not words or words[0].startswith("-"):
        return parser
    parser = parser._subparsers._group_actions[0].choices[words[0]]  # type: ignore[union-attr]
    sub = parser._subparsers
    if sub is not None and len(words) > 1 and words[1] in sub._group_actions[0].choices:
        parser = sub._group_actions[0].choices[words[1]]
    return parser


def test_every_flag_and_choice_in_the_readme_table_is_in_the_commands_help():
    rows = re.findall(r"^\| `benchledger ([^`]+)` \|", _read("README.md"), re.M)
    assert len(rows) >= 20
    for row in rows:
        words = row.replace("\\|", "|").replace("[", " ").replace("]", " ").split()
        parser = _parser_for(words)
        options = parser._option_string_actions
        for i, word in enumerate(words):
            if not re.fullmatch(r"--?[a-z][a-z-]*", word):
                continue
            assert word in options, f"README row `benchledger {row}`: {word} is not an option"
            choices = options[word].choices
            value = words[i + 1] if i + 1 < len(words) else ""
            if choices and re.fullmatch(r"[a-z|]+", value):
                assert set(value.split("|")) <= set(choices), (row, word, value)


def test_every_benchledger_command_in_the_readme_code_blocks_parses():
    import shlex

    from cli import build_parser

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
