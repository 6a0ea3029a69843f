"""A planted-claim study's tables, re-derived from its imported arms.

The peer's report (docs/peer-studies.md, "The published tables") states its tables per run
family; each is a projection here over the sealed runs ``import-peer`` wrote, one per arm
folder. No rule reads a family's, an arm's or a treatment's name: every arm is placed by the
coordinates its run recorded (``Coords``, read in ``coords_of``; the arms are arm.py's), and
every table is laid out from those (their cells: study_tables.py; printed by
study_render.py). Every cell is counted from recorded events: the rates from the tasks
card's decisions (benchledger's own rulings, ``decisions``), delivery from the planted claim
the arm recorded, evaluator writes from its store snapshots (read-backs), spend from its
recorded tokens at the price table (``projections.prices``), so each traces with ``audit``
to the events behind it. An excluded attempt folder is never counted in a rate (its spend is
shown apart); a cell the family's design has and the ledger lacks is shown as missing, and
the arm named by its coordinates under the tables.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from benchledger.ledger.events import Event
from benchledger.projections.fold import fold
from benchledger.projections.prices import Cost, PriceTable, load_prices
from benchledger.projections.suites.lifecycle import scorecard as lc
from benchledger.projections.suites.tasks.arm import (
    ABSENT,
    MECHANISM,
    NOT_RECORDED,
    PAGE,
    PLANTS,
    SINKS,
    TRUE,
    UNKNOWN,
    WORLD,
    WRONG,
    Arm,
    Coords,
    StudyFold,
    arm_of,
    evaluator_writes,
    graded_units,
    refs_of,
    same_model,
)
from benchledger.projections.suites.tasks.decisions import (
    BUDGET,
    CLAIM_SEEN,
    COPRESENT,
    CORRECTIVE,
    EXPOSED,
    OBSERVED,
    QUERIED,
    TRAP,
    refutable,
)
from benchledger.projections.suites.tasks.items import recorded_readings, recorded_task
from benchledger.projections.suites.tasks.study_tables import (
    Cell,
    Count,
    Diff,
    Row,
    Table,
    Usd,
    applies,
    count_of,
)
from benchledger.projections.usage import TOKEN_KINDS
from benchledger.protocols.task_grading import ADOPTED, CORRECT, OTHER, grade


class Study:
    """The imported arms, placed by their coordinates; analysed and excluded apart."""

    def __init__(self, arms: Iterable[Arm], prices: PriceTable | None = None) -> None:
        self.prices = prices or load_prices(None)
        self.arms: dict[tuple[str, str], Arm] = {}
        self.excluded: list[Arm] = []
        self.duplicates: list[str] = []
        for arm in arms:
            if arm.excluded:
                self.excluded.append(arm)
                continue
            key = (arm.family, arm.name)
            if key in self.arms:
                self.duplicates.append(f"{arm.run_id} (also {self.arms[key].run_id})")
                continue
            self.arms[key] = arm
        everyone = [*self.arms.values(), *self.excluded]
        self._models = self._model_groups([a.coords.model for a in everyone])
        self._classes = {cell: self._class_of(cell, everyone)
                         for cell in {a.coords.cell for a in everyone}}  # fmt: skip
        self.missing: list[str] = []

    # -- coordinates the study reads across arms

    def _model_groups(self, names: Iterable[str]) -> dict[str, str]:
        """Each recorded model name -> its model's display name (the shortest alias)."""
        groups: list[list[str]] = []
        for name in sorted(set(names)):
            joined = [g for g in groups if any(same_model(name, m) for m in g)]
            merged = [name, *itertools.chain.from_iterable(joined)]
            groups = [g for g in groups if g not in joined] + [merged]
        return {m: min(g, key=lambda x: (len(x), x)) for g in groups for m in g}

    def model(self, arm: Arm) -> str:
        """The arm's model, its aliases as one (the shortest name)."""
        return self._models.get(arm.coords.model, arm.coords.model)

    def _price(self, model: str) -> float:
        """The model's input price per million tokens, to order columns (inf: unpriced)."""
        names = [m for m, shown in self._models.items() if shown == model]
        rows = [
            p
            for p in self.prices.models.values()
            if not p.nominal
            and any(
                same_model(n, p.model) or any(same_model(n, a) for a in p.aliases) for n in names
            )
        ]
        return min((p.input for p in rows), default=math.inf)  # fmt: skip

    def models(self, arms: Iterable[Arm] | None = None) -> tuple[str, ...]:
        """The models of ``arms`` (default: every analysed arm), cheapest first."""
        shown = {self.model(a) for a in (self.arms.values() if arms is None else arms)}
        return tuple(sorted(shown, key=lambda m: (self._price(m), m)))

    @staticmethod
    def _class_of(cell: tuple[str, ...], arms: Sequence[Arm]) -> str:
        """A claim's class, from its tasks and the evidence its arms recorded."""
        mine = [a for a in arms if a.coords.cell == cell]
        tasks = {t: d for a in mine for t, d in (a.card.meta.config.get("tasks") or {}).items()}
        if tasks and all(isinstance(d, dict) and refutable(d.get("expected_sql"))
                         for d in tasks.values()):  # fmt: skip
            return WORLD
        sources = [(a.card.meta.config.get("evidence") or {}).get("correct_source")
                   for a in mine if a.planted]  # fmt: skip
        if any(sources):
            return PAGE
        return WORLD if sources else UNKNOWN  # a plant whose correct source is the world

    def cls(self, arm: Arm) -> str:
        return self._classes.get(arm.coords.cell, UNKNOWN)

    def families(self) -> list[str]:
        """The families, in the order their first arm ran (recorded start)."""
        first: dict[str, str] = {}
        for arm in self.arms.values():
            started = str((arm.card.meta.config.get("manifest") or {}).get("started_at") or "")
            first[arm.family] = min(first.get(arm.family, started), started)
        return sorted(first, key=lambda f: (first[f], f))

    def _ordered(self, arms: Iterable[Arm]) -> list[Arm]:
        families = {f: n for n, f in enumerate(self.families())}
        models = {m: n for n, m in enumerate(self.models())}
        return sorted(
            arms,
            key=lambda a: (
                families.get(a.family, 0),
                a.coords.fixture,
                a.coords.client,
                self.cls(a),
                a.coords.cell,
                PLANTS.index(a.coords.plant),
                a.coords.sink,
                models.get(self.model(a), 0),
                a.variant_id,
                a.name,
            ),
        )

    # -- adoption on a control arm: answers of the value the claim's wrong arm plants ------

    def adopted(self, arm: Arm | None) -> Count | None:
        """k/n adopted: on an arm that planted a wrong value, its own rulings; on a control
        arm, the attempts answering the value the claim's wrong arm plants (the peer's
        script classifies every arm against its cell's readings: a control's chance answer
        of that value is its baseline); 0 when no wrong arm of the claim is in the ledger."""
        if arm is None or arm.metric(ADOPTED).den:
            return count_of(arm, ADOPTED)
        chance = self._chance(arm)
        return Count(len(chance), len(graded_units(arm)), refs_of(chance, CORRECT))

    def other(self, arm: Arm | None) -> Count | None:
        """k/n answering none of the readings (on a control arm: less its chance adoptions)."""
        found = count_of(arm, OTHER)
        if arm is None or found is None or arm.metric(ADOPTED).den:
            return found
        moved = [u for u in self._chance(arm) if u.verdict(OTHER) is True]
        kept = [r for r in found.refs if all(r not in u.ref(OTHER) for u in moved)]
        return Count(found.k - len(moved), found.n, tuple(kept))

    def _chance(self, arm: Arm) -> list[lc.Unit]:
        """A control arm's attempts whose answer reads, within the task's tolerance, as the
        value a wrong arm of the same claim and fixture plants (not correct first: the
        script's order)."""
        planted = self._planted_values(arm)
        config = arm.card.meta.config
        out = []
        for u in graded_units(arm):
            decided = u.decisions.get(CORRECT)
            if decided is None or decided.verdict is True or u.protocol_id not in planted:
                continue
            task = recorded_task(config, u.protocol_id)
            if task is None:
                continue
            try:
                got = grade(decided.answer, task.grading).got_value
            except ValueError:  # a grading that needs more than the answer
                continue
            value, tolerance = planted[u.protocol_id]
            if got is not None and abs(got - value) <= tolerance:
                out.append(u)
        return out

    def _planted_values(self, arm: Arm) -> dict[str, tuple[float, float]]:
        """Task id -> (the planted wrong value, tolerance), from the first analysed wrong arm
        of ``arm``'s claim and fixture (its recorded readings); {} when there is none."""
        for wrong in self.analysed(lambda a: a.coords.plant == WRONG
                                   and a.coords.cell == arm.coords.cell
                                   and a.coords.fixture == arm.coords.fixture):  # fmt: skip
            out = {}
            for tid, refs in recorded_readings(wrong.card.meta.config).items():
                value = next((r.value for r in refs.readings if r.name == ADOPTED), None)
                if value is not None:
                    out[tid] = (value, refs.tolerance)
            if out:
                return out
        return {}

    def analysed(self, keep: Callable[[Arm], bool] = lambda a: True) -> list[Arm]:
        return self._ordered(a for a in self.arms.values() if keep(a))

    def _coords(self, arm: Arm) -> tuple[tuple[str, str], ...]:
        c = arm.coords
        return (("family", c.family), ("arm", arm.name), ("class", self.cls(arm)),
                ("cell", " ".join(c.cell)), ("plant", c.plant), ("model", self.model(arm)),
                ("client", c.client), ("variant", arm.variant_id), ("sink", c.sink),
                ("fixture", c.fixture))  # fmt: skip

    def _where(self, arm: Arm) -> str:
        return f"{arm.family}/{arm.name}"

    def _design(self, arm: Arm) -> tuple[str, str, str]:
        return arm.family, arm.coords.fixture, arm.coords.client

    def designed(self) -> dict[tuple[str, str, str], tuple[set[tuple[str, ...]], set[str],
                                                          set[str]]]:  # fmt: skip
        """Per (family, fixture, client): the cells, plants and models its arms cross."""
        out: dict[tuple[str, str, str], tuple[set[tuple[str, ...]], set[str], set[str]]] = {}
        for arm in [*self.arms.values(), *self.excluded]:
            cells, plants, models = out.setdefault(self._design(arm), (set(), set(), set()))
            cells.add(arm.coords.cell)
            plants.add(arm.coords.plant)
            models.add(self.model(arm))
        return out

    def find(
        self,
        design: tuple[str, str, str],
        cell: tuple[str, ...],
        plant: str,
        model: str,
        keep: Callable[[Arm], bool] = lambda a: True,
    ) -> Arm | str | None:
        """The analysed arm at these coordinates; '-' when the family's design has no such
        arm; None (and named as missing) when it has and the ledger lacks it."""
        found = [a for a in self.analysed(keep) if self._design(a) == design
                 and a.coords.cell == cell and a.coords.plant == plant
                 and self.model(a) == model]  # fmt: skip
        if found:
            return found[0]
        cells, plants, models = self.designed().get(design, (set(), set(), set()))
        if cell not in cells or plant not in plants or model not in models:
            return "-"
        set_aside = sorted(a.card.setting("label") for a in self.excluded
                           if self._design(a) == design and a.coords.cell == cell
                           and a.coords.plant == plant and self.model(a) == model)  # fmt: skip
        where = (f"{design[0]}: {self._classes.get(cell, UNKNOWN)} ({' '.join(cell)}), "
                 f"{plant}, {model}, {design[2]}")  # fmt: skip
        if set_aside:
            where += f" (only excluded attempts: {', '.join(set_aside)})"
        if where not in self.missing:
            self.missing.append(where)
        return f"excluded ({', '.join(set_aside)})" if set_aside else None

    def _matrix(
        self,
        id_: str,
        title: str,
        section: str,
        plants: tuple[str, ...],
        check: str,
        interval: bool,
        by_variant: bool,
    ) -> Table | None:
        """Rows: a family's cell (and variant) at a plant; columns: models."""
        arms = self.analysed(lambda a: a.coords.plant in plants)
        designs = {self._design(a) for a in arms}  # columns: every model the designs cross
        models = self.models([a for a in (*self.arms.values(), *self.excluded)
                              if self._design(a) in designs])  # fmt: skip
        rows: list[Row] = []
        seen: set[tuple[Any, ...]] = set()
        for arm in arms:
            variant = arm.coords.variant if by_variant else ""
            key = (self._design(arm), arm.coords.cell, arm.coords.plant, variant)
            if key in seen:
                continue
            seen.add(key)

            def same(a: Arm, v: str = variant) -> bool:
                return not by_variant or a.coords.variant == v

            cells: list[Cell] = []
            for m in models:
                found = self.find(self._design(arm), arm.coords.cell, arm.coords.plant, m, same)
                cells.append(found if isinstance(found, str) else count_of(found, check))
            label = (f"{arm.family}: {self.cls(arm)} ({' '.join(arm.coords.cell)}), "
                     f"{arm.coords.plant}" + (f", {arm.variant_id}" if by_variant else "")
                     + f", {arm.coords.client}")  # fmt: skip
            coords = tuple(kv for kv in self._coords(arm) if kv[0] not in ("arm", "model")
                           and (by_variant or kv[0] != "variant"))  # fmt: skip
            rows.append(Row(label, label, tuple(cells), coords))
        if not rows:
            return None
        return Table(id_, title, section, models, tuple(rows),
                     interval=models if interval else ())  # fmt: skip

    # Section 3: adoption matrices, controls, the mechanism, delivery and co-presence

    def adoption(self) -> Table | None:
        return self._matrix("adoption", "Adoption of the planted wrong claim, per family",
                            "3, 4, 5, 6", (WRONG,), ADOPTED, True, True)  # fmt: skip

    def controls(self) -> Table | None:
        return self._matrix("controls", "Correct answers on the control arms", "3",
                            (ABSENT, TRUE), CORRECT, False, False)  # fmt: skip

    def _mechanism_row(self, arm: Arm) -> Row:
        cells = (count_of(arm, QUERIED), count_of(arm, OBSERVED), self.adopted(arm),
                 count_of(arm, CORRECT), self._exceptions(arm))  # fmt: skip
        return Row(self._where(arm), self._label(arm), cells, self._coords(arm))

    def _label(self, arm: Arm) -> str:
        c = arm.coords
        return f"{arm.family}/{arm.name}: {c.plant}, {self.model(arm)}, {c.client}" + (
            f", {arm.variant_id}, {c.sink}" if c.plant != ABSENT else ""
        )

    def mechanism(self) -> Table | None:
        rows = tuple(self._mechanism_row(a) for a in self.analysed(
            lambda a: bool(a.metric(QUERIED).den)))  # fmt: skip
        notes = ("every arm whose tasks one whole-table query answers (the queried diagnostic "
                 "applies); exceptions, on the wrong arms: attempts that observed the count "
                 "and did not answer correctly, or did not observe it and did not adopt (the "
                 "exact separation)",)  # fmt: skip
        return Table("mechanism", "Whether the refuting count was observed, per episode",
                     "3, 4, 5", MECHANISM, rows, interval=("adopted",),
                     notes=notes) if rows else None  # fmt: skip

    @staticmethod
    def _exceptions(arm: Arm) -> int | str:
        """Attempts the exact separation does not hold for ('-' off a wrong arm)."""
        if arm.coords.plant != WRONG:
            return "-"
        out = 0
        for u in graded_units(arm):
            observed, adopted = u.verdict(OBSERVED), u.verdict(ADOPTED)
            correct = u.verdict(CORRECT)
            if observed is None:
                continue  # the query does not apply: the separation is about it
            out += bool((observed and not correct) or (not observed and adopted is not True))
        return out

    def delivery(self) -> Table | None:
        rows = []
        for arm in self.analysed(lambda a: a.coords.plant == WRONG):
            plant = arm.planted
            seen, beside = count_of(arm, CLAIM_SEEN), applies(arm, COPRESENT)
            found = (plant.get("in_search", NOT_RECORDED), plant.get("in_sink", NOT_RECORDED))
            cells: tuple[Cell, ...] = (*found, seen, beside)
            rows.append(Row(self._where(arm), self._label(arm), cells, self._coords(arm)))
        cols = ("in search", "in sink", "claim in transcript", "correct source beside it")
        notes = ("in search / in sink: the plant's cross-identity read-back, as the arm "
                 "recorded it (planted.json); where the correct source is the world, not a "
                 "page, co-presence is the mechanism table's query rate",)  # fmt: skip
        return Table("delivery", "Delivery and co-presence on the wrong arms", "3",
                     cols, tuple(rows), notes=notes) if rows else None  # fmt: skip

    # Sections 4 and 5: arms differing in the claim's wording, and in where it is stored

    def _contrast_groups(self, fixed: Callable[[Arm], tuple[Any, ...]], varies: Callable[
            [Arm], Any]) -> list[list[Arm]]:  # fmt: skip
        groups: dict[tuple[Any, ...], list[Arm]] = {}
        for arm in self.analysed(lambda a: a.coords.plant == WRONG):
            groups.setdefault(fixed(arm), []).append(arm)
        return [g for g in groups.values() if len({varies(a) for a in g}) > 1]

    def variants(self) -> Table | None:
        def c(a: Arm) -> Coords:
            return a.coords

        groups = self._contrast_groups(
            lambda a: (a.family, c(a).cell, self.model(a), c(a).client, c(a).sink,
                       c(a).fixture), lambda a: c(a).variant)  # fmt: skip
        rows = tuple(self._mechanism_row(a) for g in groups for a in g)
        notes = ("wrong arms of one family differing only in the planted claim's wording (its "
                 "directive strength); the plant's id names each",)  # fmt: skip
        return Table("variants", "The claim-wording contrast", "4", MECHANISM, rows,
                     interval=("adopted",), notes=notes) if rows else None  # fmt: skip

    def sink(self) -> Table | None:
        """Wrong arms of one claim (same text, cell, model, client, fixture): by sink."""

        def c(a: Arm) -> Coords:
            return a.coords

        groups: dict[tuple[Any, ...], list[Arm]] = {}
        for arm in self.analysed(lambda a: a.coords.plant == WRONG and a.coords.sink in SINKS):
            key = (c(arm).variant, c(arm).cell, self.model(arm), c(arm).client, c(arm).fixture)
            groups.setdefault(key, []).append(arm)
        rows: list[Row] = []
        for (_, cell, model, client, _), arms in groups.items():
            if len(arms) < 2 and len({a.coords.sink for a in arms}) < 2:
                continue
            rows += [self._mechanism_row(a) for a in arms]
            for lacking in sorted(set(SINKS) - {a.coords.sink for a in arms}):
                where = (f"the same claim at a {lacking} sink: {self.cls(arms[0])} "
                         f"({' '.join(cell)}), wrong, {model}, {client}")  # fmt: skip
                if where not in self.missing:
                    self.missing.append(where)
        notes = ("sink: where the plant stored the claim, read from the arm's store snapshot "
                 "(its changeset's target entity) or a page carrying its needle",)  # fmt: skip
        return Table("sink", "Storage location: one claim at each sink", "5", MECHANISM,
                     tuple(rows), interval=("adopted",), notes=notes) if rows else None  # fmt: skip

    def fixtures(self) -> Table | None:
        """Arms of every fixture but the one most arms are about, with wrong minus absent."""
        counts: dict[str, int] = {}
        for arm in self.arms.values():
            counts[arm.coords.fixture] = counts.get(arm.coords.fixture, 0) + 1
        if len(counts) < 2:
            return None
        main = max(counts, key=lambda f: (counts[f], f))
        rows: list[Row] = []
        others = self.analysed(lambda a: a.coords.fixture != main)
        for arm in others:
            cells: tuple[Cell, ...] = (len(graded_units(arm)), count_of(arm, CORRECT),
                                       self.adopted(arm), count_of(arm, TRAP),
                                       self.other(arm), "")  # fmt: skip
            rows.append(Row(self._where(arm), self._label(arm), cells, self._coords(arm)))
        for arm in others:
            if arm.coords.plant != WRONG:
                continue
            absent = self.find(self._design(arm), arm.coords.cell, ABSENT, self.model(arm))
            wrong, base = self.adopted(arm), self.adopted(absent) if isinstance(
                absent, Arm) else None  # fmt: skip
            diff: Cell = Diff(wrong, base) if wrong and base and wrong.n and base.n else (
                absent if isinstance(absent, str) else None)  # fmt: skip
            label = f"{arm.family}/{arm.name} wrong minus absent ({self.model(arm)})"
            rows.append(Row(f"{self._where(arm)}-minus-absent", label,
                            ("", "", "", "", "", diff), self._coords(arm)))  # fmt: skip
        cols = ("episodes", "correct", "adopted", "trap", "other", "wrong minus absent")
        notes = (f"the arms about a fixture other than {main} (the one most arms are about)",)
        return Table("fixtures", "Cross-fixture arms", "5", cols, tuple(rows),
                     interval=("adopted",), notes=notes)  # fmt: skip

    # Section 6: spend, and the client contrast

    def spend(self) -> Table | None:
        """Every arm whose model the price table prices: its tokens and spend, analysed and
        excluded apart."""
        rows: list[Row] = []
        totals: dict[bool, list[Usd]] = {False: [], True: []}
        for arm in [*self.analysed(), *self._ordered(self.excluded)]:
            cost = arm.card.priced()
            if not isinstance(cost, Cost):
                continue  # unpriced: a subscription client's alias, or no model
            tokens = dict(arm.card.usage.tokens) if arm.card.usage else {}
            usd = Usd(cost.usd, tokens, tuple(u.finished for u in arm.card.units if u.finished))
            totals[arm.excluded].append(usd)
            cells: tuple[Cell, ...] = (
                "excluded: " + str(arm.card.meta.config.get("label") or "") if arm.excluded
                else "analysed", self.adopted(arm),
                *(tokens.get(k, 0) for k in TOKEN_KINDS), f"{cost.priced_as} ({cost.match})",
                usd)  # fmt: skip
            rows.append(Row(self._where(arm), self._label(arm), cells, self._coords(arm)))
        if not rows:
            return None
        for excluded, label in ((False, "analysed arms"), (True, "excluded attempts")):
            usd = Usd(math.fsum(u.usd for u in totals[excluded]), {})
            rows.append(Row(f"total/{label}", f"total, {label}",
                            ("", "", *([""] * len(TOKEN_KINDS)), "", usd)))  # fmt: skip
        every = Usd(math.fsum(u.usd for t in totals.values() for u in t), {})
        rows.append(Row("total/all", "total", ("", "", *([""] * len(TOKEN_KINDS)), "", every)))
        cols = ("status", "adopted", *(f"{k} tokens" for k in TOKEN_KINDS), "priced as", "spend")
        notes = (
            f"each attempt's recorded tokens at the price table of "
            f"{self.prices.date.isoformat()} ({self.prices.source}); an arm whose model "
            "the table does not price (a subscription client's alias) is not shown",
        )
        return Table("spend", "Metered spend", "6", cols, tuple(rows),
                     interval=("adopted",), notes=notes)  # fmt: skip

    def clients(self) -> Table | None:
        """Arms of one cell, plant, model, claim and fixture run by different clients."""
        everyone = self.analysed()
        clients = tuple(sorted({a.coords.client for a in everyone}))
        if len(clients) < 2:
            return None
        groups: dict[tuple[Any, ...], dict[str, Arm]] = {}
        for arm in everyone:
            c = arm.coords
            key = (c.cell, c.plant, self.model(arm), c.variant, c.fixture)
            groups.setdefault(key, {}).setdefault(c.client, arm)
        rows = []
        for (cell, plant, model, _, _), by in groups.items():
            if len(by) < 2:
                continue
            first = next(iter(by.values()))
            cells = tuple(self.adopted(by.get(cl)) if cl in by else "-" for cl in clients)
            label = f"{self.cls(first)} ({' '.join(cell)}), {plant}, {model}"
            rows.append(
                Row(
                    label,
                    label,
                    cells,
                    tuple(
                        kv for kv in self._coords(first) if kv[0] not in ("family", "arm", "client")
                    ),
                )
            )
        return Table("clients", "The client contrast: adoption by client", "6", clients,
                     tuple(rows), interval=clients) if rows else None  # fmt: skip

    # Section 7: exposure to the plant's reviewer note, and adoption conditional on it

    def exposure(self) -> Table | None:
        found = self._matrix("exposure", "Episodes whose transcript carries the reviewer note",
                             "7", (WRONG,), EXPOSED, False, True)  # fmt: skip
        return found

    def conditional(self) -> Table | None:
        rows = []
        for arm in self.analysed(lambda a: a.coords.plant == WRONG):
            cells: list[Cell] = []
            for exposed in (True, False):
                units = [u for u in graded_units(arm) if u.verdict(EXPOSED) is exposed]
                adopted = [u for u in units if u.verdict(ADOPTED) is True]
                correct = [u for u in units if u.verdict(CORRECT) is True]
                cells += (len(units), Count(len(adopted), len(units), refs_of(adopted, ADOPTED)),
                          Count(len(correct), len(units), refs_of(correct, CORRECT)))  # fmt: skip
            rows.append(Row(self._where(arm), self._label(arm), tuple(cells), self._coords(arm)))
        cols = ("exposed", "exposed adopted", "exposed correct",
                "unexposed", "unexposed adopted", "unexposed correct")  # fmt: skip
        return Table("conditional", "Adoption conditional on exposure", "7", cols,
                     tuple(rows)) if rows else None  # fmt: skip

    # Section 8: what the evaluators wrote back

    def writes(self) -> Table | None:
        rows = []
        for arm in self.analysed(lambda a: a.coords.plant == WRONG):
            new = evaluator_writes(arm)
            if new is None:
                continue  # the arm recorded no evaluation snapshots
            corrective = sum(len(u.decisions[CORRECTIVE].refs) for u in graded_units(arm)
                             if u.verdict(CORRECTIVE))  # fmt: skip
            statuses = ", ".join(sorted({str(i.get("status")) for i in new}))
            cells: tuple[Cell, ...] = (len(new), corrective, statuses or "-")
            rows.append(Row(self._where(arm), self._label(arm), cells, self._coords(arm)))
        cols = ("evaluator captures", "corrective", "statuses")
        notes = ("evaluator captures: insights in store-after-eval.json and not in "
                 "store-before-eval.json, captured by neither the plant's teacher nor its "
                 "witness; corrective: capture calls of the episodes (category correction, or "
                 "the peer's text match), counted from the transcripts",)  # fmt: skip
        return Table("writes", "Captures by evaluator identities on the wrong arms", "8",
                     cols, tuple(rows), notes=notes) if rows else None  # fmt: skip

    # Section 9: contrasts between wrong arms differing in one coordinate

    def _differs(self, a: Arm, b: Arm) -> list[str]:
        ca, cb = a.coords, b.coords
        out = [n for n, x, y in (("cell", ca.cell, cb.cell), ("model", self.model(a),
               self.model(b)), ("client", ca.client, cb.client), ("sink", ca.sink, cb.sink),
               ("fixture", ca.fixture, cb.fixture)) if x != y]  # fmt: skip
        if ca.cell == cb.cell and ca.variant != cb.variant:
            out.append("variant")  # the wording differs within one claim (across cells, always)
        return out

    def _reader(self, coordinate: str) -> Callable[[Arm], str]:
        """How an arm's value of ``coordinate`` is shown."""
        if coordinate == "cell":
            return self.cls
        if coordinate == "model":
            return self.model
        if coordinate == "variant":
            return lambda a: a.variant_id
        return lambda a: str(getattr(a.coords, coordinate))

    def contrasts(self) -> Table | None:
        rows = []
        for family in self.families():
            arms = [a for a in self.analysed() if a.family == family and a.coords.plant == WRONG]
            for a, b in itertools.combinations(arms, 2):
                differs = self._differs(a, b)
                if len(differs) != 1:
                    continue
                ka, kb = self.adopted(a), self.adopted(b)
                assert ka is not None and kb is not None
                if (kb.k * ka.n) > (ka.k * kb.n):  # the larger rate first
                    a, b, ka, kb = b, a, kb, ka
                what = self._reader(differs[0])
                shared = [
                    v
                    for k, v in (
                        ("cell", self.cls(a)),
                        ("model", self.model(a)),
                        ("variant", a.variant_id),
                    )
                    if k != differs[0] and (k, differs[0]) != ("variant", "cell")
                ]
                label = (f"{family}: {what(a)} minus {what(b)} (differ in {differs[0]}; "
                         f"{', '.join(shared)})")  # fmt: skip
                coords = (("family", family), ("differs", differs[0]), ("a", a.name),
                          ("b", b.name), ("a_value", what(a)), ("b_value", what(b)),
                          ("a_model", self.model(a)), ("b_model", self.model(b)),
                          ("a_class", self.cls(a)), ("b_class", self.cls(b)))  # fmt: skip
                rows.append(Row(f"{family}/{a.name}-minus-{b.name}", label,
                                (Diff(ka, kb) if ka.n and kb.n else None,), coords))  # fmt: skip
        notes = ("every pair of wrong arms of one family differing in exactly one coordinate; "
                 "the higher adoption rate first",)  # fmt: skip
        return Table("contrasts", "Contrasts of adoption (Newcombe 95%)", "9",
                     ("difference",), tuple(rows), notes=notes) if rows else None  # fmt: skip

    # Budget exhaustion and harness failures per family (the peer's flags)

    def flags(self) -> Table:
        rows = []
        for family in self.families():
            arms = [a for a in self.analysed() if a.family == family]
            episodes = sum(len(a.card.units) for a in arms)
            budget = sum(int(a.metric(BUDGET).num) for a in arms)
            failures = sum(a.card.harness_failures for a in arms)
            rows.append(Row(family, family, (len(arms), episodes, budget, failures),
                            (("family", family),)))  # fmt: skip
        return Table(
            "flags",
            "Budget exhaustion and harness failures per family",
            "7.2",
            ("arms", "episodes", "budget exhausted", "harness failures"),
            tuple(rows),
            notes=(
                "the report names budget flags among its exploratory measures and prints no "
                "count; these are the attempts' own budget_exhausted and error fields",
            ),
        )

    def inventory(self) -> Table:
        rows = []
        for arm in self.analysed():
            cells: tuple[Cell, ...] = (len(arm.card.units), self.adopted(arm),
                                       count_of(arm, CORRECT), applies(arm, COPRESENT))  # fmt: skip
            rows.append(Row(self._where(arm), self._label(arm), cells, self._coords(arm)))
        return Table("arms", "The arms, placed by what their runs recorded", "1, 2",
                     ("episodes", "adopted", "correct", "correct source beside it"),
                     tuple(rows), interval=("adopted",))  # fmt: skip

    def tables(self) -> list[Table]:
        """Every table the imported arms can fill, in the report's order."""
        self.missing = []
        made = (self.inventory(), self.adoption(), self.controls(), self.mechanism(),
                self.delivery(), self.variants(), self.sink(), self.fixtures(), self.spend(),
                self.clients(), self.exposure(), self.conditional(), self.writes(),
                self.contrasts(), self.flags())  # fmt: skip
        return [t for t in made if t is not None]


def study_of(runs: Iterable[tuple[str, Sequence[tuple[Event, str]]]]) -> Study:
    """The study of every imported arm among ``runs`` ((run id, events) pairs)."""
    arms = []
    for run_id, events in runs:
        card, snapshots = fold(StudyFold(), events)
        arm = arm_of(run_id, card, snapshots)
        if arm is not None:
            arms.append(arm)
    return Study(arms)


__all__ = [
    "Study",
    "study_of",
]
