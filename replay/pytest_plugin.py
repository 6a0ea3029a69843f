"""pytest plugin: ``pytest --benchledger-replay DIR`` checks every bundle in DIR as one test.

Registered through the ``pytest11`` entry point, so any project with benchledger
installed can gate its CI on benchledger's replay checks. Each bundle must verify and
re-derive (``--benchledger-replay-level full`` re-executes it from the log instead). The
items carry the ``benchledger_replay`` marker: ``-m benchledger_replay`` runs only them.

This module stays light at import (pytest loads it in every session); the replay
machinery is imported only when a bundle is checked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

MARKER = "benchledger_replay"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("benchledger", "benchledger replay checks")
    group.addoption(
        "--benchledger-replay",
        metavar="DIR",
        default=None,
        help="check every bundle (*.jsonl, *.jsonl.gz) in DIR: it must verify and "
        "re-derive; one test per bundle",
    )
    group.addoption(
        "--benchledger-replay-level",
        choices=["rederive", "full"],
        default="rederive",
        help="replay level for --benchledger-replay",
    )
    group.addoption(
        "--benchledger-replay-protocols",
        metavar="PATH",
        default=None,
        help="protocol folder for --benchledger-replay (default: as recorded)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}: a benchledger bundle replay check")


class ReplayFailed(Exception):
    """A bundle did not verify, re-derive or replay; the report's lines say where."""


class BundleItem(pytest.Item):
    """One bundle's replay check."""

    def __init__(self, *, path: str, level: str, protocols: str | None, **kw: Any) -> None:
        super().__init__(**kw)
        self.bundle = path
        self.level = level
        self.protocols = protocols
        self.add_marker(MARKER)

    def runtest(self) -> None:
        from benchledger.replay.check import check_bundle

        checked = check_bundle(self.bundle, level=self.level, protocols=self.protocols)
        if not checked.ok:
            lines = checked.report.lines() if checked.report is not None else [checked.line()]
            raise ReplayFailed("\n".join(lines))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, ReplayFailed):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, None, str]:
        # The session's folder, not the bundle's: pytest names items by this path, and a
        # bundle folder outside the project would show as ``../``.
        return self.path, None, f"benchledger replay {self.level}: {self.bundle}"


class BundleDir(pytest.Collector):
    """The bundles of the ``--benchledger-replay`` folder, one item each."""

    def __init__(self, *, directory: str, level: str, protocols: str | None, **kw: Any) -> None:
        super().__init__(**kw)
        self.directory = directory
        self.level = level
        self.protocols = protocols

    def collect(self) -> list[pytest.Item]:
        from benchledger.replay.check import bundles_in

        return [
            BundleItem.from_parent(
                self, name=Path(p).name, path=p, level=self.level, protocols=self.protocols
            )
            for p in bundles_in(self.directory)
        ]


# tryfirst: our items join the collection before -m and -k deselect, so both apply to them.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    directory = config.getoption("--benchledger-replay")
    if not directory:
        return
    collector = BundleDir.from_parent(
        session,
        name="benchledger-replay",
        nodeid="benchledger-replay",
        directory=directory,
        level=config.getoption("--benchledger-replay-level"),
        protocols=config.getoption("--benchledger-replay-protocols"),
    )
    items.extend(collector.collect())
