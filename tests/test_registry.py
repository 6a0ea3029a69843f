"""The one registry: built-in entries load lazily, installed entry points join them with
their origin, and a missing or broken extension is one line (unusable input, exit 2).

Entry points are real ones: each test writes a ``.dist-info`` folder with an
``entry_points.txt`` onto ``sys.path`` (what pip writes for an installed distribution).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchledger.ledger.errors import BenchledgerError, UnusableInput
from benchledger.ledger.registry import BrokenPlugin, Registry, UnknownName

GROUP = "benchledger.test-registry"


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Install a distribution ``acme-memory 1.2.3`` whose entry points are ``lines``."""

    def install(lines: list[str], module: str = "") -> None:
        info = tmp_path / "acme_memory-1.2.3.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-memory\nVersion: 1.2.3\n")
        (info / "entry_points.txt").write_text(f"[{GROUP}]\n" + "\n".join(lines) + "\n")
        if module:
            (tmp_path / "acme_memory.py").write_text(module)
        monkeypatch.syspath_prepend(str(tmp_path))

    yield install
    sys.modules.pop("acme_memory", None)


def test_a_built_in_entry_is_loaded_only_when_looked_up() -> None:
    loads: list[str] = []
    reg: Registry[str] = Registry("widget", GROUP)
    reg.register("plain", lambda: loads.append("plain") or "made")
    assert reg.names() == ("plain",) and loads == []
    assert reg.lookup("plain") == "made"
    assert reg.lookup("plain") == "made" and loads == ["plain"]


def test_an_unknown_name_lists_the_known_ones_as_unusable_input() -> None:
    reg: Registry[int] = Registry("widget", GROUP)
    reg.add("one", 1)
    with pytest.raises(UnknownName) as caught:
        reg.lookup("two")
    assert isinstance(caught.value, UnusableInput) and caught.value.exit_code == 2
    assert str(caught.value) == "widget 'two': no such widget (known: one)"


def test_an_installed_entry_point_joins_with_its_distribution_as_origin(installed) -> None:
    installed(["acme = acme_memory:WIDGET"], "WIDGET = 'from acme'\n")
    reg: Registry[str] = Registry("widget", GROUP)
    reg.add("builtin", "ours")
    [acme, builtin] = reg.entries()
    assert (acme.name, acme.origin, acme.where) == (
        "acme",
        "acme-memory 1.2.3",
        "acme_memory:WIDGET",
    )
    assert builtin.origin == "benchledger"
    assert reg.lookup("acme") == "from acme"


def test_a_name_registered_in_code_wins_over_an_entry_point(installed) -> None:
    installed(["same = acme_memory:WIDGET"], "WIDGET = 'theirs'\n")
    reg: Registry[str] = Registry("widget", GROUP)
    reg.add("same", "ours")
    assert reg.lookup("same") == "ours"


@pytest.mark.parametrize(
    ("line", "module", "problem"),
    [
        ("bad = acme_memory:MISSING", "X = 1\n", "cannot be loaded (AttributeError"),
        ("bad = acme_memory:X", "raise RuntimeError('boom')\n", "RuntimeError: boom"),
        ("bad = no_such_module_here:X", "", "ModuleNotFoundError"),
    ],
    ids=["missing-attribute", "import-raises", "missing-module"],
)
def test_a_broken_entry_point_is_one_line_naming_it(installed, line, module, problem) -> None:
    installed([line], module)
    reg: Registry[object] = Registry("widget", GROUP)
    with pytest.raises(BrokenPlugin) as caught:
        reg.lookup("bad")
    text = str(caught.value)
    assert "\n" not in text and problem in text
    assert text.startswith(f"widget plugin bad = {line.split(' = ')[1]}: ")
    assert isinstance(caught.value, BenchledgerError) and caught.value.exit_code == 2


def test_the_check_refuses_an_object_of_the_wrong_kind(installed) -> None:
    installed(["wrong = acme_memory:X"], "X = 42\n")

    def must_be_text(obj: object) -> str:
        if not isinstance(obj, str):
            raise TypeError(f"is {type(obj).__name__}, not a widget")
        return obj

    reg: Registry[str] = Registry("widget", GROUP, check=must_be_text)
    with pytest.raises(BrokenPlugin, match="is int, not a widget"):
        reg.lookup("wrong")


def test_unregister_forgets_a_name_and_what_it_loaded() -> None:
    reg: Registry[str] = Registry("widget", GROUP)
    reg.add("toy", "t")
    assert reg.lookup("toy") == "t"
    reg.unregister("toy")
    assert "toy" not in reg
    with pytest.raises(UnknownName):
        reg.lookup("toy")
