"""A run that did not run is not green (docs/runner.md, "Harness failures").

The platform here is docs/plugins.md's example plugin, registered in the test alone as an
installed plugin would be, given the lifecycle capability with a capture check that
raises on the protocols the test names: a vendor's adapter bug, which the harness's fault
barrier turns into a harness failure (a bug, not an infrastructure error). Such a run
exits 1 however many units failed, says "harness" (never "infra") wherever it counts
them, opens every display of its card with "N of M units did not run (harness
failure)", and keeps each traceback in a local log that the unit's error names, never in
the ledger, with the run's secrets scrubbed out.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from benchledger.cli import main
from benchledger.harness.errors import InfraError
from benchledger.harness.platforms.platform import PLATFORMS
from benchledger.harness.settings import Settings
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import UnitFinishedBody
from benchledger.platforms import CaptureCheck
from tests.conftest import write_run
from tests.test_platform_registry import _example
from tests.test_queue import _jobs, _sql_ready, _until, pg  # noqa: F401

SEALED = re.compile(r"run (\S+) sealed, root ([0-9a-f]{64})")
SECRET = "sk-ant-test-0123456789abcdef"  # a key the adapter's error echoes back
DID_NOT_RUN = re.compile(r"(\d+) of (\d+) units did not run \(harness failure\)")


@dataclass
class Faults:
    """What the broken adapter does on each capture check, by words of the protocol's fact
    (the first three protocols of the committed set teach the 'anchor tier', the 'audit
    channel' and the 'benchmark tier')."""

    bug: set[str] = field(default_factory=set)  # raise a bug of the adapter's (harness)
    infra: set[str] = field(default_factory=set)  # raise an infrastructure error
    everywhere: bool = False  # a bug on every protocol


@pytest.fixture
def faults() -> Iterator[Faults]:
    """``broken-memory``: the docs' tiny-memory with a capture check that fails as told."""
    example = _example()
    told = Faults()

    class BrokenClient(example.TinyClient):  # type: ignore[misc, name-defined]
        async def describe(self) -> Any:
            return example.Description("broken-memory", "0.1.0",
                                       stages=("teach", "capture", "recall", "abstain"),
                                       sinks=())  # fmt: skip

        async def check_capture(self, ev: Any, *, identity: int, target: Any, since: float,
                                poll: Any) -> Any:  # fmt: skip
            if told.everywhere or any(words in target.fact for words in told.bug):
                # A vendor's adapter reading an id from an answer that echoed its key.
                return CaptureCheck(str(int(f"denied for key {SECRET}")), "found", [])
            if any(words in target.fact for words in told.infra):
                raise InfraError(
                    "transport", "connection refused by the vendor's server", retryable=False
                )
            return CaptureCheck(None, "no capture found", [])

        async def promote(self, ev: Any, *, capture: str, target: Any) -> Any:
            raise AssertionError("never reached: no capture is ever found")

        async def check_update(self, ev: Any, **kw: Any) -> Any:
            raise AssertionError("never reached: no capture is ever found")

    class BrokenProvisioner(example.TinyProvisioner):  # type: ignore[misc, name-defined]
        @example.asynccontextmanager
        async def runtime(self) -> Any:
            client = BrokenClient(self.pool_size)
            try:
                yield client
            finally:
                await client.aclose()

    class Broken(example.TinyMemory):  # type: ignore[misc, name-defined]
        name = "broken-memory"

        def parse(self, text: str) -> Any:
            return example.PlatformSpec("broken-memory", text) if text == "broken-memory" else None

        def provisioner(self, spec: Any, provision: Any) -> Any:
            return BrokenProvisioner(spec, pool_size=provision.pool_size)

    PLATFORMS.add("broken-memory", Broken(), origin="broken-memory-dist 0.1")
    try:
        yield told
    finally:
        PLATFORMS.unregister("broken-memory")


def settings(tmp_path: Path) -> Settings:
    """The command line's settings: the run's ledger, its failure logs and a key, in tmp."""
    return Settings(ledger=str(tmp_path / "l.sqlite"), log_dir=str(tmp_path / "logs"),
                    anthropic_api_key=SECRET)  # fmt: skip


def run(tmp_path: Path, capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = main(["run", "--platform", "broken-memory", "--limit", "3", *argv],
                settings(tmp_path))  # fmt: skip
    out = capsys.readouterr()
    return code, out.out, out.err


def unit_errors(tmp_path: Path, run_id: str) -> dict[str, str]:
    """Each finished unit stream's ``unit_finished.error``, and every event's text."""
    ledger = Ledger(open_store(str(tmp_path / "l.sqlite")))
    try:
        return {
            event.stream: body.error
            for event, _ in ledger.events(run_id)
            if isinstance(body := event.body, UnitFinishedBody)
        }
    finally:
        ledger.store.close()


def ledger_text(tmp_path: Path) -> bytes:
    with open(tmp_path / "l.sqlite", "rb") as fh:
        return fh.read()


@pytest.mark.parametrize("failing", ["every unit", "one unit"])
def test_a_run_with_a_harness_failed_unit_exits_1_and_names_the_log_holding_its_traceback(
    faults, tmp_path, capsys, failing
):
    if failing == "every unit":
        faults.everywhere = True
    else:
        faults.bug = {"anchor tier"}  # the first protocol, bl-anchor-tier
    code, out, err = run(tmp_path, capsys, "--run-id", "broken")
    n = 3 if failing == "every unit" else 1
    assert code == 1, out[-2000:] + err
    log = tmp_path / "logs" / "broken.log"
    assert f"run FAILED: {n} of 3 units did not run (harness failure); their tracebacks are " \
           f"in {log}" in out, out[-2000:]  # fmt: skip
    assert "infra" not in out.split("run FAILED:")[1]

    errors = [e for e in unit_errors(tmp_path, "broken").values() if e]
    assert len(errors) == n
    for error in errors:
        assert error.startswith("internal error in capture: ValueError: invalid literal")
        assert error.endswith(f"(traceback in {log})")
        assert SECRET not in error and "<redacted>" in error
    traceback = log.read_text(encoding="utf-8")
    assert traceback.count("Traceback (most recent call last):") == n
    assert "in check_capture" in traceback and 'int(f"denied for key' in traceback
    assert SECRET not in traceback and "<redacted>" in traceback
    assert b"Traceback (most recent call last)" not in ledger_text(tmp_path)


def test_every_display_of_its_card_opens_with_how_many_units_did_not_run(faults, tmp_path, capsys):
    faults.bug = {"anchor tier"}
    code, out, _ = run(tmp_path, capsys, "--run-id", "broken")
    assert code == 1 and SEALED.search(out)
    card = [ln for ln in out.splitlines() if ln and not ln.startswith(("running ", "unit "))]
    assert DID_NOT_RUN.search(card[0]), out[:3000]
    ledger = str(tmp_path / "l.sqlite")
    for fmt in ("table", "markdown"):
        assert main(["report", "broken", "--ledger", ledger, "--format", fmt]) == 0
        first = capsys.readouterr().out.splitlines()[0]
        assert "1 of 3 units did not run (harness failure)" in first, (fmt, first)
    assert main(["report", "broken", "--ledger", ledger, "--format", "html"]) == 0
    page = capsys.readouterr().out
    body = page[page.index("<body") :]
    banner = re.search(r'<p class="banner" role="alert"[^>]*>([^<]*)</p>', body)
    assert banner is not None and banner.start() < body.index("<table"), body[:1500]
    assert banner[1] == "1 of 3 units did not run (harness failure)"
    assert main(["report", "broken", "--ledger", ledger, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["warning"] == "1 of 3 units did not run (harness failure)"
    assert doc["completeness"]["harness_failed_units"] == ["bl-anchor-tier/1"]
    assert main(["compare", "broken", "broken", "--ledger", ledger]) == 0
    assert "1 of 3 units did not run (harness failure)" in capsys.readouterr().out
    assert main(["log", "broken", "--ledger", ledger]) == 0
    assert capsys.readouterr().out.startswith("1 of 3 units did not run (harness failure)")
    # The error naming the log is the unit's own text: re-derivation still agrees.
    assert main(["replay", "broken", "--ledger", ledger]) == 0


def test_every_unit_harness_failed_says_harness_not_infra(faults, tmp_path, capsys):
    faults.everywhere = True
    code, out, _ = run(tmp_path, capsys, "--run-id", "broken")
    assert code == 1
    card = [ln for ln in out.splitlines() if ln and not ln.startswith(("running ", "unit "))]
    assert "3 of 3 units did not run (harness failure)" in card[0], out[:3000]
    assert "run FAILED: 3 of 3 units did not run (harness failure)" in out, out[-2000:]
    assert "0 infra-failed, 3 harness-failed" in out
    assert "units infra-failed" not in out


def test_debug_prints_each_traceback_as_it_is_written_scrubbed(faults, tmp_path, capsys):
    faults.bug = {"anchor tier"}
    code, _, quiet = run(tmp_path, capsys, "--run-id", "quiet")
    assert code == 1 and "Traceback" not in quiet
    code, _, err = run(tmp_path, capsys, "--run-id", "loud", "--debug")
    assert code == 1
    assert err.count("Traceback (most recent call last):") == 1, err
    assert "== " in err and "loud/bl-anchor-tier/1 (capture)" in err
    assert 'int(f"denied for key' in err and SECRET not in err and "<redacted>" in err


def test_a_resumed_run_that_seals_with_an_earlier_harness_failure_still_exits_1(
    faults, tmp_path, capsys
):
    faults.bug, faults.infra = {"anchor tier"}, {"audit channel"}
    code, out, err = run(tmp_path, capsys, "--run-id", "r")
    assert code == 1 and "run r: 1 unit ended in infrastructure errors" in err, out + err
    faults.infra = set()  # the vendor's server is back: the retried unit gets its answer
    code, out, err = main_resume(tmp_path, capsys)
    assert SEALED.search(out), out[-2000:] + err
    assert code == 1
    assert "run FAILED: 1 of 3 units did not run (harness failure)" in out


def main_resume(tmp_path: Path, capsys: Any) -> tuple[int, str, str]:
    # A plugin platform is never taken from the record: the resume names it again.
    code = main(["run", "--resume", "r", "--retry-infra", "--platform", "broken-memory"],
                settings(tmp_path))  # fmt: skip
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_library_s_run_result_says_so_too(faults, tmp_path):
    from benchledger.running import run as run_library

    faults.bug = {"anchor tier"}
    result = run_library(platform="broken-memory", limit=3, run_id="lib",
                         settings=settings(tmp_path))  # fmt: skip
    assert result.sealed and result.exit_code == 1
    assert result.harness == ("bl-anchor-tier/1",)
    assert result.log == os.path.join(str(tmp_path / "logs"), "lib.log")


def test_a_locomo_card_opens_with_its_questions_that_did_not_run_in_every_format(tmp_path, capsys):
    ledger_file = str(tmp_path / "l.sqlite")
    ledger = Ledger(open_store(ledger_file))
    units = {(f"p00{i}", 1): {"locomo_f1": True} for i in range(4)}  # as the record plans
    errors = {("p002", 1): "internal error in ask: ModuleNotFoundError: No module named 'x'"}
    write_run(ledger, "lo", units, suite="locomo", errors=errors)
    ledger.store.close()
    line = "1 of 4 units did not run (harness failure)"
    for fmt in ("table", "markdown"):
        assert main(["report", "lo", "--ledger", ledger_file, "--format", fmt]) == 0
        first = capsys.readouterr().out.splitlines()[0]
        assert line in first, (fmt, first)
    assert main(["report", "lo", "--ledger", ledger_file, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["warning"] == line
    assert main(["report", "lo", "--ledger", ledger_file, "--format", "html"]) == 0
    page = capsys.readouterr().out
    assert page.index(line) < page.index("<ul>")
    for fmt in ("table", "markdown", "json", "html"):
        assert main(["compare", "lo", "lo", "--ledger", ledger_file, "--format", fmt]) == 0
        assert f"lo: {line}" in capsys.readouterr().out, fmt


@pytest.mark.postgres
def test_run_queue_wait_on_a_run_its_worker_sealed_with_a_harness_failure_exits_1(
    faults,
    pg,  # noqa: F811  (the queue tests' fixture: a fresh schema and its queue's, dropped after)
    tmp_path,
    capsys,
):
    faults.bug = {"anchor tier"}
    url = pg
    waited: dict[str, int] = {}

    def wait() -> None:
        argv = ["run", "--queue", "--wait", "--platform", "broken-memory", "--limit", "2",
                "--run-id", "qh", "--ledger", url]  # fmt: skip
        waited["code"] = main(argv, settings(tmp_path))

    # The worker takes signals, so it has the main thread; --wait polls in another.
    waiting = threading.Thread(target=wait)
    waiting.start()
    try:
        _until("the run's jobs queued", lambda: _sql_ready(url) and _jobs(url).get("todo") == 2,
               60)  # fmt: skip
        argv = ["worker", "--once", "--platform", "broken-memory", "--ledger", url]
        assert main(argv, settings(tmp_path)) == 0
        waiting.join(timeout=120)
        out = capsys.readouterr().out
        assert waited.get("code") == 1, out[-3000:]
        assert SEALED.search(out) and "1 of 2 units did not run (harness failure)" in out
        assert "run FAILED: 1 of 2 units did not run (harness failure); each unit's error " \
               "names the log holding its traceback" in out  # fmt: skip
        log = tmp_path / "logs" / "qh.log"  # the worker's, on its machine
        assert f"(traceback in {log})" in out and "Traceback" in log.read_text()
    finally:
        waiting.join(timeout=120)


def test_a_run_sealed_despite_infra_failed_units_opens_with_them_named_as_infrastructure(
    tmp_path, capsys
):
    ledger_file = str(tmp_path / "l.sqlite")
    ledger = Ledger(open_store(ledger_file))
    units = {(f"p00{i}", 1): {"captured": True} for i in range(3)}
    errors = {("p001", 1): "capture: transport: MCP session: connection reset"}
    write_run(ledger, "r", units, errors=errors, seal=True)
    ledger.store.close()
    assert main(["report", "r", "--ledger", ledger_file]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == "1 of 3 units did not run (infrastructure failure)"


def test_a_failure_log_that_cannot_be_written_is_named_with_why_and_the_run_goes_on(
    faults, tmp_path, capsys
):
    faults.bug = {"anchor tier"}
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the log folder should be")
    told = Settings(ledger=str(tmp_path / "l.sqlite"), log_dir=str(blocked))
    code = main(["run", "--platform", "broken-memory", "--limit", "3", "--run-id", "b"], told)
    out = capsys.readouterr().out
    assert code == 1 and SEALED.search(out), out[-2000:]
    (error,) = [e for e in unit_errors(tmp_path, "b").values() if e]
    assert error.endswith(f"(traceback not written to {blocked}/b.log: File exists)")
