"""What an imported tasks arm used and cost: the usage rows the lifecycle shows, in report
and compare; unpriced at the packaged table (claude-cli records bare aliases), with the
reason in the cell; priced at a ``--prices`` table naming the aliases."""

from __future__ import annotations

import ast
import html
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from benchledger.cli import main
from benchledger.harness.peer.tasks_import import import_arm
from benchledger.ledger import Ledger, open_store
from benchledger.projections.prices import load_prices
from benchledger.projections.usage_view import dollars
from tests.conftest import peer_dir

MODELS = ("haiku", "sonnet", "opus")
# The bare aliases the peer's claude-cli arms record, and the full ids its PRICING names.
FULL_IDS = {"haiku": "claude-haiku-4-5-20251001", "sonnet": "claude-sonnet-5",
            "opus": "claude-opus-5"}  # fmt: skip


def arm_dir(model: str) -> str:
    family = os.path.join(peer_dir(), "bench", "results", "knowledge-pollution", "rq1-warehouse")
    return os.path.join(family, f"checkable-wrong-{model}")


def attempts(model: str) -> list[dict[str, Any]]:
    with open(os.path.join(arm_dir(model), "results.json"), encoding="utf-8") as fh:
        found: list[dict[str, Any]] = json.load(fh)["attempts"]
    return found


def stated_rates() -> dict[str, tuple[float, float]]:
    """The peer's stated (input, output) USD per MTok by full model id (its ``PRICING``)."""
    script = os.path.join(
        peer_dir(), "bench", "reports", "knowledge-pollution", "pollution_tables.py"
    )
    with open(script, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    rates: dict[str, tuple[float, float]] = next(
        ast.literal_eval(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "PRICING" for t in node.targets)
    )
    return rates


@pytest.fixture(scope="module")
def arms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The three checkable-wrong arms imported into one ledger: model -> run id."""
    path = str(tmp_path_factory.mktemp("tasks-usage") / "ledger.sqlite")
    ledger = Ledger(open_store(path))
    runs = {"ledger": path}
    for model in MODELS:
        runs[model], _, _ = import_arm(ledger, arm_dir(model))
    yield runs
    ledger.store.close()


@pytest.fixture(scope="module")
def alias_prices(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A price table with one row per bare alias at the peer's stated rates (no cache
    prices needed: the arms record no cache tokens)."""
    rates = stated_rates()
    rows = "".join(
        f'[models."{alias}"]\ninput = {rates[full][0]}\noutput = {rates[full][1]}\n'
        f"cache_read = 0\ncache_creation = 0\n"
        for alias, full in FULL_IDS.items()
    )
    path = tmp_path_factory.mktemp("prices") / "aliases.toml"
    path.write_text(f'date = 2026-08-06\nsource = "aliases at the peer\'s rates"\n{rows}')
    return str(path)


def cli(capsys: pytest.CaptureFixture[str], arms: dict[str, str], *argv: str) -> str:
    code = main([*argv, "--ledger", arms["ledger"]])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def spend(model: str, rates: dict[str, tuple[float, float]]) -> float:
    """The arm's spend from its results file: sum(input * in + output * out) / 1e6."""
    inp, out = rates[FULL_IDS[model]]
    return sum(a["input_tokens"] * inp + a["output_tokens"] * out for a in attempts(model)) / 1e6


def test_a_tasks_report_shows_its_tokens_wall_and_why_it_is_unpriced(capsys, arms) -> None:
    out = cli(capsys, arms, "report", arms["haiku"])
    rows = {line.split(" ", 1)[0]: line for line in out.splitlines()}
    inp = sum(a["input_tokens"] for a in attempts("haiku"))
    outp = sum(a["output_tokens"] for a in attempts("haiku"))
    assert f"in {inp:,}, out {outp:,}, cache read 0, cache write 0" in rows["tokens"]
    assert "wall" in rows["duration"] and "model calls not recorded" in out  # tokens, no calls
    assert "not priced: no price for model 'haiku' in the table of 2026-08-06" in rows["cost"]
    usage = json.loads(cli(capsys, arms, "report", arms["haiku"], "--format", "json"))["usage"]
    assert usage["cost"]["usd"] is None and usage["tokens"]["input"] == inp


@pytest.mark.parametrize("fmt", ["table", "markdown", "html"])
def test_a_tasks_compare_shows_the_usage_rows_and_each_unpriced_reason(
    capsys, arms, fmt: str
) -> None:
    out = cli(capsys, arms, "compare", *(arms[m] for m in MODELS), "--format", fmt)
    for model in MODELS:
        why = f"not priced: model '{model}' is not in the price table"
        assert (html.escape(why) if fmt == "html" else why) in out
        tokens = attempts(model)
        inp, outp = (sum(a[k] for a in tokens) for k in ("input_tokens", "output_tokens"))
        assert f"{inp:,} / {outp:,}" in out
    assert "tokens in / out" in out and "cost per passed unit" in out and "wall" in out


def test_a_price_table_naming_the_aliases_prices_report_and_compare_as_the_results_say(
    capsys, arms, alias_prices
) -> None:
    rates = stated_rates()
    for model in MODELS:
        js = cli(capsys, arms, "report", arms[model], "--format", "json", "--prices", alias_prices)
        assert json.loads(js)["usage"]["cost"]["usd"] == pytest.approx(spend(model, rates))
    js = cli(capsys, arms, "compare", *(arms[m] for m in MODELS), "--format", "json",
             "--prices", alias_prices)  # fmt: skip
    cells = json.loads(js)["extra"]["cost (USD)"]
    assert cells == {k: dollars(spend(m, rates)) for k, m in zip("abc", MODELS, strict=True)}


def test_the_packaged_table_prices_the_full_ids_at_the_peers_rates_and_not_the_aliases() -> None:
    table = load_prices(None)
    for full, (inp, out) in stated_rates().items():
        price = table.models[full]
        assert (price.input, price.output) == (inp, out)
        assert price.cache_read == pytest.approx(0.1 * inp)
        assert price.cache_creation == pytest.approx(1.25 * inp)
    for alias in MODELS:  # bare aliases stay unpriced: no cache counts, a price would undercount
        assert table.lookup(alias) is None
