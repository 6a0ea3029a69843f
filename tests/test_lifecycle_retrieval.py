"""The lifecycle's retrieval metrics: the taught fact's rank in each episode's first search
call, recall@k and MRR (docs/metrics.md, Retrieval), from fixed recorded search results
and from a real run on the embedded platform."""

from __future__ import annotations

import json

import pytest

from benchledger.cli import main
from benchledger.ledger.events import (
    Body,
    EpisodeFinishedBody,
    EpisodeStartedBody,
    Event,
    RunStartedBody,
    SessionCallBody,
    UnitFinishedBody,
    UnitStartedBody,
    make_event,
)
from benchledger.projections.card import CI_EPISODES, CI_WILSON
from benchledger.projections.fold import fold
from benchledger.projections.stats import wilson
from benchledger.projections.suites.lifecycle import ranks
from benchledger.projections.suites.lifecycle.scorecard import LifecycleFold, scorecard
from tests.conftest import protocol_subset

FACT = {"p1": "Fact one is bronze.", "p2": "Fact two is North.", "p3": "Fact three is 41."}
NEW = "Fact two is East."  # p2's correction


def _groups(*texts: str) -> str:
    """A search result in refplatform's shape: one group, its hits in rank order."""
    return json.dumps({"groups": [{"source": "insights", "hits": [{"text": t} for t in texts]}]})


class _Unit:
    """A unit stream written by hand: episodes, their calls, their ends."""

    def __init__(self, run: str, pid: str) -> None:
        self.stream, self.pid, self.events = f"{run}/{pid}/1", pid, []
        self.add(UnitStartedBody(protocol_id=pid, attempt=1))

    def add(self, body: Body) -> None:
        self.events.append(make_event(self.stream, len(self.events), "", 0, body))

    def episode(self, stage: str, *calls: tuple[str, str, bool], finish: bool = True) -> None:
        self.add(EpisodeStartedBody(episode=stage))
        for tool, text, error in calls:
            content = [{"type": "text", "text": text}]
            self.add(SessionCallBody(episode=stage, method="tools/call", tool=tool,
                                     content=content, is_error=error))  # fmt: skip
        if finish:
            self.add(EpisodeFinishedBody(episode=stage))

    def finish(self) -> None:
        self.add(UnitFinishedBody())


def _recorded() -> list[Event]:
    """Three units whose ranks are known by construction (see each comment)."""
    u1 = _Unit("r", "p1")
    u1.episode("recall", ("search", _groups("unrelated", FACT["p1"]), False))  # rank 2
    u1.episode("transfer", ("search", "Error: bad query", True),  # an error is skipped
               ("search", _groups(FACT["p1"]), False))  # rank 1  # fmt: skip
    u1.episode("abstain", ("search", _groups("a", "b", FACT["p1"]), False))  # leak at 3
    u1.finish()
    u2 = _Unit("r", "p2")
    u2.episode("recall", ("trino_query", FACT["p2"], False))  # no search call: a miss
    # update_recall looks for the corrected fact: the stale one at 1 is not it; rank 4,
    # and a second search (where it is first) does not count.
    u2.episode("update_recall",
               ("search", _groups(FACT["p2"], "x", "y", NEW.upper()), False),
               ("search", _groups(NEW), False))  # fmt: skip
    u2.finish()
    u3 = _Unit("r", "p3")
    u3.episode("recall", ("search", FACT["p3"], False), finish=False)  # a try retried ...
    u3.episode("recall", ("search", "nothing like it", False))  # ... its last try: a miss
    u3.finish()
    header = make_event("r", 0, "", 0, RunStartedBody(suite="lifecycle"))
    return [header, *u1.events, *u2.events, *u3.events]


FACTS = {
    pid: {"recall": f, "transfer": f, "abstain": f, "update_recall": NEW if pid == "p2" else ""}
    for pid, f in FACT.items()
}


def _card(facts=FACTS):
    folded = fold(LifecycleFold(), ((e, "") for e in _recorded()))
    return scorecard([folded], facts=facts, facts_note="" if facts else "not here")


def test_ranks_are_the_facts_place_in_each_episodes_first_search_call_by_the_surfacing_rule():
    card = _card()
    got = {u.protocol_id: u.ranks for u in card.units}
    assert got == {
        "p1": {"recall": 2, "transfer": 1, "abstain": 3},
        "p2": {"recall": None, "update_recall": 4},
        "p3": {"recall": None},
    }


@pytest.mark.parametrize(
    ("name", "num", "den"),
    [
        # ranked episodes: p1 recall 2, p1 transfer 1, p2 recall -, p2 update_recall 4,
        # p3 recall -; MRR = (1/2 + 1 + 1/4) / 5 = 0.35
        ("recall_at_1", 1, 5),
        ("recall_at_5", 3, 5),
        ("recall_at_10", 3, 5),
        ("mrr", 1.75, 5),
        ("recall_at_1.recall", 0, 3),
        ("recall_at_5.recall", 1, 3),
        ("mrr.recall", 0.5, 3),
        ("recall_at_1.transfer", 1, 1),
        ("mrr.transfer", 1.0, 1),
        ("recall_at_1.update_recall", 0, 1),
        ("recall_at_5.update_recall", 1, 1),
        ("mrr.update_recall", 0.25, 1),
        ("abstain_leak_at_5", 1, 1),  # abstain's rank is in no recall@k above
    ],
    ids=lambda v: str(v),
)
def test_recall_at_k_and_mrr_have_their_hand_computed_values(name, num, den):
    m = _card().metrics[name]
    assert (m.num, m.den) == (pytest.approx(num), den)


def test_mrr_is_a_mean_whose_interval_is_a_bootstrap_over_episodes_never_wilsons():
    """Wilson's interval is for a share; reciprocal ranks (1/2, 1/4) are not 0/1 outcomes.
    Below MIN_BOOTSTRAP_GROUPS episodes MRR has no interval; recall@k keeps Wilson's."""
    card = _card()  # one attempt per protocol: episodes are not clustered
    assert card.metrics["mrr"].ci is None and card.metrics["mrr"].ci_method == CI_EPISODES
    assert card.metrics["recall_at_5"].ci_method == CI_WILSON and card.metrics["recall_at_5"].ci
    ranked = [
        ranks.Ranked(f"r/p{i}/1", f"p{i}", 1, "recall", (1, 2, 4, None)[i % 4], ranks.Searched(1))
        for i in range(12)
    ]  # reciprocal ranks 1, 1/2, 1/4, 0 three times each: MRR 0.4375
    m = ranks.metrics(ranked, clustered=False)["mrr"]
    assert m.rate == pytest.approx(0.4375) and m.ci_method == CI_EPISODES and m.ci is not None
    assert 0 < m.ci.low < m.rate < m.ci.high < 1
    assert (m.ci.low, m.ci.high) != pytest.approx(tuple(wilson(m.num, m.den)))


def test_without_the_runs_facts_no_episode_is_ranked_and_the_card_says_why():
    card = _card(facts=None)
    assert card.metrics["recall_at_5"].den == 0 and card.metrics["mrr"].rate is None
    assert card.ranks_note == "not here" and "no ranks: not here" in card.metrics["mrr"].label


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A real run of three protocols (one with an update) on the embedded platform."""
    tmp = tmp_path_factory.mktemp("lcret")
    folder = protocol_subset(tmp, ["bl-anchor-tier", "bl-closing-window", "bl-focus-region"])
    ledger = str(tmp / "l.sqlite")
    for run_id in ("rr", "rr2"):  # the second, to compare with
        assert main(["run", "--protocols", folder, "--ledger", ledger, "--run-id", run_id]) == 0
    return ledger


def test_a_run_on_the_embedded_platform_reports_ranks_per_unit_and_rederives_equal(run, capsys):
    capsys.readouterr()
    assert main(["report", "rr", "--ledger", run, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    ranked = {pid: us[0]["ranks"] for pid, us in doc["protocols"].items()}
    assert set(ranked) == {"bl-anchor-tier", "bl-closing-window", "bl-focus-region"}
    assert set(ranked["bl-focus-region"]) == {"recall", "update_recall", "abstain"}
    every = [r for rs in ranked.values() for s, r in rs.items() if s != "abstain"]
    assert (
        doc["metrics"]["recall_at_10"]["den"] == len(every) == 6
    )  # 3 recall, 2 transfer, 1 update_recall
    assert doc["metrics"]["recall_at_10"]["num"] == sum(r is not None and r <= 10 for r in every)
    assert doc["metrics"]["mrr"]["num"] == pytest.approx(sum(1 / r for r in every if r))
    for fmt, shown in (("table", "recall@5"), ("markdown", "| all ranked |"),
                       ("html", "recall_at_5.update_recall")):  # fmt: skip
        assert main(["report", "rr", "--ledger", run, "--format", fmt]) == 0
        assert shown in capsys.readouterr().out, fmt
    assert main(["replay", "rr", "--level", "rederive", "--ledger", run]) == 0
    said = capsys.readouterr().out
    assert "all equal" in said and f"{16 + len(ranks.NAMES)} metrics" in said


def test_audit_of_recall_at_5_names_each_episodes_search_call_and_its_rank(run, capsys):
    capsys.readouterr()
    assert main(["audit", "rr", "recall_at_5", "--ledger", run]) == 0
    out = capsys.readouterr().out
    assert "recall_at_5 = " in out and "6 contributing units" in out
    lines = out.splitlines()
    assert sum("[projection] first search call seq" in ln for ln in lines) == 6
    assert sum(" session_call " in ln and "tools/call search" in ln for ln in lines) == 6
    assert any("the fact at rank" in ln for ln in lines)


def test_compare_sets_two_runs_retrieval_metrics_side_by_side_paired_by_episode(run, capsys):
    capsys.readouterr()
    assert main(["compare", "rr", "rr2", "--ledger", run, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for name in ("recall_at_1", "recall_at_5", "recall_at_10", "mrr", "mrr.update_recall"):
        row = doc["metrics"][name]
        assert row["a"]["den"] == row["b"]["den"] > 0, name
        # The embedded platform is deterministic: the same ranks, no difference.
        assert row["b"]["vs_baseline"]["diff"] == 0 and row["b"]["vs_baseline"]["pairs"] > 0
    assert main(["compare", "rr", "rr2", "--ledger", run]) == 0
    assert "recall_at_5.transfer" in capsys.readouterr().out
