"""A platform is one registered object: the command line, a run, a resume and replay find it.

The toy platform here is docs/plugins.md's example module (read from the docs' marked
block) with one option of its own, registered in the test alone, as an installed plugin's
entry point would register it; nothing of benchledger's names it.
"""

from __future__ import annotations

import json
import re
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from benchledger.cli import main
from benchledger.harness.platforms.platform import PLATFORMS, PlatformOption, of_record, resolve
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import GraderDecisionBody

DOC = Path(__file__).resolve().parent.parent / "docs" / "plugins.md"
MODULE = re.compile(r"<!-- example-plugin:module -->\n```python\n(?P<text>.*?)```", re.S)
SEALED = re.compile(r"run (\S+) sealed, root ([0-9a-f]{64})")


def _example() -> types.ModuleType:
    """The docs' example plugin module, loaded from its text."""
    found = MODULE.search(DOC.read_text(encoding="utf-8"))
    assert found is not None
    module = types.ModuleType("tiny_memory_example")
    exec(compile(found["text"], str(DOC), "exec"), module.__dict__)  # our own docs' text
    return module


@pytest.fixture
def toy() -> Iterator[list[dict[str, str]]]:
    """``toy-memory`` registered (with a ``--toy-note`` option) as a plugin would be; the
    options each provisioner was given, in order."""
    example = _example()
    given: list[dict[str, str]] = []

    class Toy(example.TinyMemory):  # type: ignore[misc, name-defined]
        name = "toy-memory"
        options: ClassVar[tuple[PlatformOption, ...]] = (
            PlatformOption("--toy-note", "toy-memory: a note for its provisioner", "TEXT",
                           purpose="is a note for toy-memory"),
        )  # fmt: skip

        def parse(self, text: str) -> Any:
            return example.PlatformSpec("toy-memory", text) if text == "toy-memory" else None

        def provisioner(self, spec: Any, provision: Any) -> Any:
            given.append(dict(provision.options))
            return super().provisioner(spec, provision)

    PLATFORMS.add("toy-memory", Toy(), origin="toy-memory-dist 1.2")
    try:
        yield given
    finally:
        PLATFORMS.unregister("toy-memory")


def test_a_registered_platform_is_found_by_its_name_and_by_its_recorded_kind(toy):
    platform, spec = resolve("toy-memory")
    assert (platform.name, spec.kind) == ("toy-memory", "toy-memory")
    assert of_record("toy-memory") is platform


def test_benchledger_platforms_lists_it_with_its_distribution_as_origin(toy, capsys):
    assert main(["platforms"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("toy-memory "))
    assert "toy-memory-dist 1.2" in line and "tiny in-process MCP memory" in line
    assert main(["platforms", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["toy-memory"]["origin"] == "toy-memory-dist 1.2"
    assert rows["embedded"]["origin"] == "benchledger"
    assert {"embedded", "embedded:process", "url", "server-memory", "basic-memory"} <= set(rows)


def test_its_own_option_reaches_its_provisioner_and_is_refused_with_another_platform(
    toy, tmp_path, capsys
):
    ledger = str(tmp_path / "toy.sqlite")
    code = main(["run", "--platform", "toy-memory", "--toy-note", "hello", "--limit", "2",
                 "--ledger", ledger])  # fmt: skip
    out = capsys.readouterr()
    assert code in (0, 1), out.err
    assert SEALED.search(out.out), out.out[-1500:]
    assert toy and all(options == {"toy_note": "hello"} for options in toy)

    assert main(["run", "--toy-note", "x", "--ledger", str(tmp_path / "other.sqlite")]) == 2
    err = capsys.readouterr().err
    assert "--toy-note is a note for toy-memory: use it with --platform toy-memory" in err


def test_without_the_lifecycle_capability_capture_promote_and_update_are_not_applicable(
    toy, tmp_path, capsys
):
    ledger = str(tmp_path / "toy.sqlite")
    main(["run", "--platform", "toy-memory", "--limit", "3", "--ledger", ledger])
    found = SEALED.search(capsys.readouterr().out)
    assert found is not None
    run_id = found[1]
    led = Ledger(open_store(ledger))
    decided = [b for e, _ in led.events(run_id) if isinstance(b := e.body, GraderDecisionBody)]
    led.store.close()
    stages = {d.stage for d in decided if d.verdict is None and "LifecycleCapability" in d.reason}
    assert stages == {"capture", "promote", "update"}, stages
    assert all(d.reason.startswith("not applicable: ") for d in decided if d.stage in stages)

    # A stage that does not apply counts in no rate: not 0 of 3 captured, but not measured,
    # as the probe declared before the run (no number at all).
    assert main(["report", run_id, "--ledger", ledger, "--format", "json"]) == 0
    capture = json.loads(capsys.readouterr().out)["metrics"]["capture_rate"]
    assert (capture["num"], capture["den"], capture["rate"]) == (None, None, None)
    assert "LifecycleCapability" in capture["not_measured"]

    # Re-derived from the log as live; full replay says why the platform has no log twin.
    assert main(["replay", run_id, "--ledger", ledger]) == 0
    capsys.readouterr()
    assert main(["replay", run_id, "--level", "full", "--ledger", ledger]) == 2
    err = capsys.readouterr().err
    assert "toy-memory, which cannot be replayed from its log: its memories lived" in err
