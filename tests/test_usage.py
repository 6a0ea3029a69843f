"""Cost and latency are projections of what a run recorded: its event times, model-call
latencies and token counts, priced by a dated table (docs/metrics.md, "Cost and latency")."""

from __future__ import annotations

import ast
import copy
import fnmatch
import json
import math
import os
import random
import tomllib

import pytest

from benchledger.cli import main
from benchledger.harness.peer.importer import import_peer
from benchledger.ledger import Ledger, UnusableInput, open_store
from benchledger.ledger.events import (
    EpisodeFinishedBody,
    ModelCallBody,
    ModelCallEvent,
    RunSealedEvent,
    RunStartedBody,
    RunStartedEvent,
    UnitAbandonedBody,
    UnitFinishedBody,
    UnitStartedBody,
)
from benchledger.projections.fold import fold
from benchledger.projections.prices import PACKAGED, Cost, Unpriced, cost, load_prices, per_pass
from benchledger.projections.source import from_bundle
from benchledger.projections.suites.lifecycle.scorecard import LifecycleFold, scorecard
from benchledger.projections.usage import UsageFold, merge, percentile, sum_tokens
from benchledger.projections.usage_view import usage_cells, usage_json, usage_lines
from tests.conftest import REPO, peer_dir, protocol_subset
from tests.sample import lifecycle_run

T0 = 1_780_000_000_000_000_000
S = 1_000_000_000  # one second in ns


class Clock:
    """A clock the test sets: every event appended is stamped with ``now``."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


def timed_run(ledger: Ledger, clock: Clock, run_id: str = "t", model: str = "fake-model") -> None:
    """A sealed run at known times: two finished units, one abandoned, four model calls."""
    clock.now = T0
    ledger.start_run(run_id, RunStartedBody(suite="lifecycle", k=1, agent="x", model=model))

    def unit(pid: str, start: float, calls: list[tuple[float, int, str]], end: float | None):
        clock.now = T0 + int(start * S)
        w = ledger.new_stream(f"{run_id}/{pid}/1")
        w.append(UnitStartedBody(protocol_id=pid, attempt=1))
        for ms, retry, error in calls:
            body = ModelCallBody(
                episode="teach", request_hash="h", latency_ms=ms, retry=retry, error=error
            )
            w.append(body)
        w.append(
            EpisodeFinishedBody(
                episode="teach",
                input_tokens=500,
                output_tokens=100,
                cache_read_tokens=2500,
                cache_creation_tokens=50,
            )
        )
        if end is None:
            w.append(UnitAbandonedBody(reason="interrupted"))
        else:
            clock.now = T0 + int(end * S)
            w.append(UnitFinishedBody(outcome={}))
        ledger.commit(w)

    unit("a", 1.0, [(100.0, 0, ""), (50.0, 0, "timeout: no answer"), (300.0, 1, "")], 3.0)
    unit("b", 2.0, [(200.0, 0, "")], 2.5)
    unit("c", 2.0, [], None)
    clock.now = T0 + 9 * S  # the seal is stamped with its last stream head's time, not now
    ledger.seal(run_id)


@pytest.fixture
def timed(sqlite_store):
    clock = Clock()
    ledger = Ledger(sqlite_store, clock=clock)
    timed_run(ledger, clock)
    return ledger, clock


# -- percentiles --------------------------------------------------------------------------


def test_percentile_is_numpys_default_linear_interpolation():
    np = pytest.importorskip("numpy")
    rng = random.Random(20261201)
    for n in (1, 2, 3, 5, 10, 37, 100):
        values = [rng.expovariate(0.01) for _ in range(n)]
        for q in (0, 1, 5, 25, 50, 62.5, 90, 95, 99, 100):
            assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_percentile_of_nothing_is_none_and_q_must_be_0_to_100():
    assert percentile([], 50) is None
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    for q in (-1, 101, math.nan):
        with pytest.raises(ValueError, match="between 0 and 100"):
            percentile([1.0], q)


# -- a run's usage from its events ----------------------------------------------------------


def test_durations_latencies_and_tokens_come_from_the_recorded_events(timed):
    ledger, _ = timed
    usage = fold(UsageFold(), ledger.events("t"))
    assert usage.wall_s == 3.0  # run_started at 0 s, run_sealed at the last unit's end, 3 s
    assert usage.unit_s == (2.0, 0.5)  # a: 1 s -> 3 s, b: 2 s -> 2.5 s; c was abandoned
    assert sorted(usage.latencies_ms) == [100.0, 200.0, 300.0]  # the failed call is not timed
    assert (usage.model_calls, usage.failed_calls, usage.retries) == (3, 1, 1)
    assert dict(usage.tokens) == {
        "input": 1500,
        "output": 300,
        "cache_read": 7500,
        "cache_creation": 150,
    }
    assert usage.model == "fake-model"
    assert "run_started to run_sealed" in usage.source
    assert "unit_started to unit_finished (2 finished)" in usage.source


def test_a_run_priced_by_the_packaged_table_costs_its_tokens_times_its_row(timed):
    ledger, _ = timed
    usage = fold(UsageFold(), ledger.events("t"))
    priced = cost(usage, load_prices(None))
    assert isinstance(priced, Cost) and priced.nominal and priced.match == "exact"
    # fake-model's nominal row: $1 in, $5 out, $0.10 cache read, $1.25 cache write per MTok
    assert priced.usd == pytest.approx((1500 * 1 + 300 * 5 + 7500 * 0.1 + 150 * 1.25) / 1e6)
    assert per_pass(priced, 2) == pytest.approx(priced.usd / 2)
    assert per_pass(priced, 0) is None


def test_the_usage_rows_say_what_each_number_is(timed):
    ledger, _ = timed
    usage = fold(UsageFold(), ledger.events("t"))
    rows = dict(usage_lines(usage, cost(usage, load_prices(None)), 2))
    assert list(rows) == ["duration", "model calls", "tool calls", "tokens", "cost", "timings"]
    assert rows["tool calls"] == "none timed"  # the fixture records no session_call
    assert rows["duration"] == "3.0 s wall; per unit p50 1.2 s, p95 1.9 s (2 units)"
    assert (
        rows["model calls"]
        == "3, latency p50 200 ms, p95 290 ms; 1 answered after a retry; 1 failed attempt"
    )
    assert rows["tokens"] == "in 1,500, out 300, cache read 7,500, cache write 150"
    assert rows["cost"].startswith("$0.003938 at prices of 2026-08-06 (mcp-data-platform")
    assert "NOMINAL price for fake-model" in rows["cost"]
    assert rows["cost"].endswith("; $0.001969 per passed protocol")


def test_the_usage_json_keeps_full_precision_and_names_its_percentile(timed):
    ledger, _ = timed
    usage = fold(UsageFold(), ledger.events("t"))
    doc = json.loads(json.dumps(usage_json(usage, cost(usage, load_prices(None)), 2)))
    assert (
        doc["wall_s"] == 3.0
        and doc["unit_s"]["n"] == 2
        and doc["unit_s"]["p95"] == pytest.approx(1.925)
    )
    assert doc["model_calls"]["latency_ms"]["p50"] == 200.0
    assert doc["cost"]["usd"] == pytest.approx(0.0039375)
    assert doc["cost"]["per_passed_usd"] == pytest.approx(0.0039375 / 2)
    assert doc["cost"]["nominal"] is True and doc["cost"]["prices_date"] == "2026-08-06"
    assert "numpy's default" in doc["percentile"]


def test_model_calls_a_redacted_bundle_withholds_are_counted_but_not_timed(tmp_path, capsys):
    db = str(tmp_path / "t.sqlite")
    clock = Clock()
    timed_run(Ledger(open_store(db), clock=clock), clock)
    out = str(tmp_path / "red.jsonl")
    assert main(["export", "t", "-o", out, "--ledger", db, "--withhold", "model_call"]) == 0
    capsys.readouterr()
    usage = fold(UsageFold(), from_bundle(out).events)
    assert usage.withheld_calls == 4 and usage.latencies_ms == () and usage.model_calls == 0
    assert usage.wall_s == 3.0 and usage.tokens["input"] == 1500  # never withheld
    assert "4 model call(s) withheld by redaction, not timed" in usage.source
    assert dict(usage_lines(usage, None, 0))["model calls"] == "0; 4 withheld by redaction"


def test_an_unsealed_run_is_timed_to_its_last_event_and_says_so(sqlite_store):
    clock = Clock()
    ledger = Ledger(sqlite_store, clock=clock)
    ledger.start_run("u", RunStartedBody(suite="lifecycle", model="fake-model"))
    clock.now = T0 + 3 * S
    w = ledger.new_stream("u/p/1")
    w.append(UnitStartedBody(protocol_id="p", attempt=1))
    ledger.commit(w)
    usage = fold(UsageFold(), ledger.events("u"))
    assert usage.wall_s == 3.0 and usage.unit_s == ()
    assert "last event, unsealed" in usage.source


def test_a_run_of_the_scripted_agent_names_no_model_and_is_not_priced(ledger):
    lifecycle_run(ledger, "s", {("p1", 1): {"captured": True}})
    usage = fold(UsageFold(), ledger.events("s"))
    priced = cost(usage, load_prices(None))
    assert isinstance(priced, Unpriced) and priced.usd is None
    assert priced.reason == "the run records no model (the scripted agent calls none)"
    assert dict(usage_lines(usage, priced, 1))["cost"].startswith("not priced: ")
    assert usage_json(usage, priced, 1)["cost"]["usd"] is None


def test_runs_merged_as_passes_sum_their_walls_and_tokens(sqlite_store):
    clock = Clock()
    ledger = Ledger(sqlite_store, clock=clock)
    timed_run(ledger, clock, "p1")
    timed_run(ledger, clock, "p2")
    one = fold(UsageFold(), ledger.events("p1"))
    both = merge([one, fold(UsageFold(), ledger.events("p2"))])
    assert both.wall_s == 6.0 and both.runs == 2
    assert both.unit_s == one.unit_s * 2 and len(both.latencies_ms) == 6
    assert both.tokens["cache_read"] == 15000 and both.model_calls == 6
    assert both.source.startswith("2 runs merged as passes: wall is the sum of their walls")
    priced = cost(both, load_prices(None))
    assert isinstance(priced, Cost) and priced.usd == pytest.approx(2 * 0.0039375)


def test_runs_of_different_models_merged_are_not_priced_as_one(sqlite_store):
    clock = Clock()
    ledger = Ledger(sqlite_store, clock=clock)
    timed_run(ledger, clock, "a", model="fake-model")
    timed_run(ledger, clock, "b", model="claude-sonnet-5")
    both = merge([fold(UsageFold(), ledger.events(r)) for r in ("a", "b")])
    priced = cost(both, load_prices(None))
    assert isinstance(priced, Unpriced) and "different models" in priced.reason


def test_a_fake_model_run_has_tokens_latencies_and_a_nominal_cost(tmp_path, capsys):
    path = str(tmp_path / "l.sqlite")
    protocols = protocol_subset(tmp_path, ["bl-keystone-region"])
    argv = ["run", "--protocols", protocols, "--ledger", path, "--run-id", "f", "--agent", "fake:0"]
    assert main(argv) == 0
    capsys.readouterr()
    events = list(Ledger(open_store(path)).events("f"))
    usage = fold(UsageFold(), events)
    calls = [e.body for e, _ in events if isinstance(e, ModelCallEvent)]
    started = next(e.at for e, _ in events if isinstance(e, RunStartedEvent))
    sealed = next(e.at for e, _ in events if isinstance(e, RunSealedEvent))
    assert usage.wall_s == (sealed - started) / 1e9 > 0
    assert len(usage.unit_s) == 1 and 0 < usage.unit_s[0] <= usage.wall_s
    assert usage.latencies_ms == tuple(c.latency_ms for c in calls if not c.error)
    assert usage.model_calls == len(calls) >= 10
    assert usage.tokens["input"] > 0 and usage.tokens["output"] > 0
    assert usage.tokens["input"] == sum(c.usage.get("input_tokens", 0) for c in calls)
    priced = cost(usage, load_prices(None))
    assert isinstance(priced, Cost) and priced.usd > 0 and priced.nominal


def test_a_fake_model_runs_nominal_cost_is_in_the_details_never_the_html_headline(tmp_path, capsys):
    path = str(tmp_path / "l.sqlite")
    protocols = protocol_subset(tmp_path, ["bl-keystone-region"])
    argv = ["run", "--protocols", protocols, "--ledger", path, "--run-id", "f", "--agent", "fake:0"]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(["report", "f", "--ledger", path, "--format", "html"]) == 0
    page = capsys.readouterr().out
    headline = page.split('<section class="headline">', 1)[1].split("</section>", 1)[0]
    assert "cost" not in headline and "$" not in headline, headline
    assert "wall duration" in headline  # the headline keeps what is measured
    assert "a NOMINAL price for fake-model" in page  # the details still say what it would cost


# -- the price table ------------------------------------------------------------------------


def test_the_packaged_table_is_dated_sourced_and_ships_with_the_package():
    table = load_prices(None)
    assert table.date.isoformat() == "2026-08-06" and "knowledge-pollution" in table.source
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as fh:
        data = tomllib.load(fh)["tool"]["setuptools"]["package-data"]
    globs = data.get("benchledger.projections", [])
    inside = os.path.relpath(os.path.realpath(PACKAGED), os.path.join(REPO, "projections"))
    assert any(fnmatch.fnmatch(inside, g) for g in globs), globs


@pytest.mark.parametrize(
    ("model", "row", "match"),
    [
        pytest.param("claude-sonnet-5", "claude-sonnet-5", "exact", id="exact"),
        pytest.param("claude-haiku-4-5", "claude-haiku-4-5-20251001", "alias", id="alias"),
        pytest.param("claude-sonnet-5-20260901", "claude-sonnet-5", "prefix", id="dated-prefix"),
    ],
)
def test_a_model_id_matches_a_row_exactly_then_by_alias_then_by_prefix(model, row, match):
    found = load_prices(None).lookup(model)
    assert found is not None and (found[0].model, found[1]) == (row, match)


@pytest.mark.parametrize("model", ["claude-sonnet-50", "gpt-4o", "sonnet"])
def test_a_model_without_a_row_is_not_priced(model):
    assert load_prices(None).lookup(model) is None


def test_a_run_of_a_model_without_a_row_says_why_it_is_not_priced(sqlite_store):
    clock = Clock()
    ledger = Ledger(sqlite_store, clock=clock)
    timed_run(ledger, clock, model="gpt-4o")
    priced = cost(fold(UsageFold(), ledger.events("t")), load_prices(None))
    assert isinstance(priced, Unpriced) and priced.reason == (
        "no price for model 'gpt-4o' in the table of 2026-08-06 (packaged); "
        "give one with --prices FILE"
    )


def test_the_packaged_prices_are_the_peer_reports_stated_rates():
    script = os.path.join(
        peer_dir(), "bench", "reports", "knowledge-pollution", "pollution_tables.py"
    )
    with open(script, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    stated = next(
        ast.literal_eval(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "PRICING" for t in node.targets)
    )
    table = load_prices(None)
    for model, (inp, out) in stated.items():
        price = table.models[model]
        # the script: cache read 0.1x input, 5-minute cache write 1.25x input
        assert (price.input, price.output) == (inp, out) and not price.nominal
        assert price.cache_read == pytest.approx(inp * 0.1)
        assert price.cache_creation == pytest.approx(inp * 1.25)


GOOD = """date = 2026-08-06
source = "a test"

[models."m"]
input = 1.0
output = 2.0
cache_read = 0.1
cache_creation = 1.25
"""


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        pytest.param(GOOD.replace("date = 2026-08-06\n", ""), None, "date: missing",
                     id="missing-date"),
        pytest.param(GOOD.replace("output = 2.0", 'output = "two"'), 6,
                     "models.\"m\".output: must be a number", id="bad-number"),
        pytest.param(GOOD.replace("input = 1.0", "input = -1.0"), 5,
                     "models.\"m\".input: must be a finite number of 0 or more", id="negative"),
        pytest.param(GOOD.replace("input = 1.0", "inptu = 1.0"), 5,
                     "models.\"m\".inptu: unknown field", id="unknown-field"),
        pytest.param(GOOD.replace("cache_read = 0.1\n", ""), 4,
                     "models.\"m\".cache_read: missing", id="missing-price"),
        pytest.param(GOOD.replace('date = 2026-08-06', 'date = "August"'), 1,
                     "date: not an ISO date", id="bad-date"),
        pytest.param(GOOD + "[oops\n", 9, "not TOML", id="not-toml"),
    ],
)  # fmt: skip
def test_a_bad_price_file_is_one_line_naming_file_line_and_field(tmp_path, text, line, says):
    path = tmp_path / "prices.toml"
    path.write_text(text)
    with pytest.raises(UnusableInput) as caught:
        load_prices(str(path))
    message = str(caught.value)
    assert "\n" not in message and says in message, message
    assert caught.value.where == str(path) and caught.value.line == line, message
    assert message.startswith(f"{path}:{line}: " if line else f"{path}: ")


def test_a_missing_price_file_is_one_line_naming_it(tmp_path):
    with pytest.raises(UnusableInput, match="no such price table"):
        load_prices(str(tmp_path / "none.toml"))


def test_a_given_table_prices_a_model_the_packaged_one_lacks(tmp_path, timed):
    ledger, _ = timed
    path = tmp_path / "prices.toml"
    path.write_text(GOOD.replace('"m"', '"fake-model"'))
    priced = cost(fold(UsageFold(), ledger.events("t")), load_prices(str(path)))
    assert isinstance(priced, Cost) and not priced.nominal and priced.source == "a test"
    assert priced.usd == pytest.approx((1500 * 1 + 300 * 2 + 7500 * 0.1 + 150 * 1.25) / 1e6)


# -- imported peer runs ----------------------------------------------------------------------

K5 = os.path.join("bench", "results", "s5-anthropic-k5")


def _import(tmp_path, path: str, run_id: str = "peer") -> Ledger:
    ledger = Ledger(open_store(str(tmp_path / f"{run_id}.sqlite")))
    import_peer(ledger, path, transcripts=[], run_id=run_id)
    return ledger


def test_the_imported_peer_k5_run_takes_its_wall_from_the_manifest_and_costs_about_20(tmp_path):
    path = os.path.join(peer_dir(), K5, "lifecycle-a3-k5.json")
    with open(path) as fh:
        published = json.load(fh)["metrics"]
    usage = fold(UsageFold(), _import(tmp_path, path).events("peer"))
    # manifest: started 2026-08-01T18:58:03.294021Z, finished 2026-08-01T21:00:23.837568Z
    assert usage.wall_s == pytest.approx(7340.543547)
    assert usage.unit_s == () and usage.latencies_ms == () and usage.model_calls == 0
    assert "not recorded by the import" in usage.source and "manifest" in usage.source
    assert dict(usage.tokens) == {
        k: published[f"total_{k}_tokens"]
        for k in ("input", "output", "cache_read", "cache_creation")
    }
    priced = cost(usage, load_prices(None))
    assert isinstance(priced, Cost) and priced.priced_as == "claude-sonnet-5"
    # The peer's README: "~$20 total at Sonnet 5 introductory pricing" for the five passes.
    assert priced.usd == pytest.approx(20.25, abs=0.01)
    rows = dict(usage_lines(usage, priced, 19))
    assert rows["duration"] == "7,341 s (2 h 2 min) wall; per-unit timing not recorded"
    assert rows["model calls"].startswith("not recorded: the run holds tokens but no model_call")


def test_an_imported_runs_model_calls_are_not_recorded_never_0_beside_its_tokens(tmp_path):
    path = os.path.join(peer_dir(), K5, "lifecycle-a3-k5.json")
    usage = fold(UsageFold(), _import(tmp_path, path).events("peer"))
    priced = cost(usage, load_prices(None))
    assert usage.tokens["output"] == 439_656 and not usage.calls_recorded
    cells = dict(usage_cells([(usage, priced, 19)]))
    assert cells["model calls"] == ("not recorded",) and cells["tokens in / out"][0].endswith(
        "439,656"
    )
    calls = usage_json(usage, priced, 19)["model_calls"]
    assert calls["recorded"] is False and calls["answered"] is None


def test_an_imported_run_cut_off_before_its_finish_time_has_no_wall(tmp_path):
    path = os.path.join(peer_dir(), K5, "lifecycle-a3-k5.json")
    with open(path) as fh:
        data = json.load(fh)
    cut = copy.deepcopy(data)
    cut["manifest"]["finished_at"] = "0001-01-01T00:00:00Z"  # how the peer writes "never"
    out = tmp_path / "cut.json"
    out.write_text(json.dumps(cut))
    usage = fold(UsageFold(), _import(tmp_path, str(out)).events("peer"))
    assert usage.wall_s is None and "is not a finish time" in usage.source
    assert dict(usage_lines(usage, None, 0))["duration"].startswith("wall not known")


def test_the_packaged_table_is_read_once_and_a_given_table_still_wins(sqlite_store, tmp_path):
    assert load_prices(None) is load_prices(None)  # every card prices at the one reading
    given = tmp_path / "prices.toml"
    given.write_text(GOOD.replace('"m"', '"gpt-4o"'))
    clock = Clock()
    ledger = Ledger(sqlite_store, clock=clock)
    timed_run(ledger, clock, model="gpt-4o")
    card = scorecard([fold(LifecycleFold(), ledger.events("t"))])
    assert isinstance(card.priced(), Unpriced)  # gpt-4o has no packaged row
    priced = card._replace(prices=load_prices(str(given))).priced()
    assert isinstance(priced, Cost) and priced.source == "a test"
    given.write_text(GOOD.replace('"m"', '"gpt-4o"').replace("a test", "edited"))
    assert load_prices(str(given)).source == "edited"  # a named file is read each time


def test_a_units_tokens_are_its_streams_and_the_runs_their_sum(sqlite_store):
    clock = Clock()
    ledger = Ledger(sqlite_store, clock=clock)
    timed_run(ledger, clock)
    usage_fold = UsageFold()
    card = scorecard([fold(LifecycleFold(), ledger.events("t"))])
    for event, link in ledger.events("t"):
        usage_fold.apply(event, link)
    assert {u.stream: u.tokens for u in card.units if u.tokens} == usage_fold.by_stream
    assert card.tokens == sum_tokens(usage_fold.by_stream.values()) == card.usage.tokens
