"""A planted-claim study's tables as text (a table or Markdown) or JSON: ``study`` prints
them (docs/peer-studies.md, "The published tables"). What an arm recorded (a plant's id, a
model name) is shown inert, one line each.
"""

from __future__ import annotations

import json
from typing import Any, Final

from benchledger.ledger.inert import inert, inert_md
from benchledger.projections.sheet import align
from benchledger.projections.suites.tasks.study import Study
from benchledger.projections.suites.tasks.study_tables import Cell, Count, Diff, Usd

FORMATS: Final = ("table", "markdown", "json")


def _cell(cell: Cell, interval: bool) -> str:
    if cell is None:
        return "(not imported)"
    if isinstance(cell, bool):
        return "yes" if cell else "no"
    if isinstance(cell, Count | Diff | Usd):
        return cell.text(interval)
    return str(cell)


def _json_cell(cell: Cell) -> Any:
    if isinstance(cell, Count | Diff | Usd):
        return cell.as_json()
    return cell


# A cell of a family's cross the ledger lacks: an arm not imported, or one the peer never
# ran (the cross is what the family's arms span, not what the peer planned).
LACKING: Final = "not in the ledger (not imported, or never run)"


def render(study: Study, fmt: str) -> str:
    """The study's tables as text (table or markdown) or JSON."""
    tables = study.tables()
    missing = sorted(set(study.missing))
    if fmt == "json":
        doc = {
            "families": study.families(),
            "runs": {f"{f}/{n}": a.run_id for (f, n), a in sorted(study.arms.items())},
            "excluded": sorted(a.run_id for a in study.excluded),
            "tables": [
                {"id": t.id, "title": t.title, "section": t.section, "columns": list(t.columns),
                 "rows": [{"key": r.key, "label": r.label, "coords": dict(r.coords),
                           "cells": dict(zip(t.columns, map(_json_cell, r.cells), strict=True))}
                          for r in t.rows], "notes": list(t.notes)}
                for t in tables
            ],
            "missing": missing,
            "duplicates": study.duplicates,
        }  # fmt: skip
        return json.dumps(doc, indent=2) + "\n"
    # Labels, columns and notes carry what the arms recorded (a plant's id, a model name):
    # one line each, and in Markdown escaped so they render as written.
    md = fmt == "markdown"

    def shown(text: str) -> str:
        return inert_md(text) if md else inert(text, value=True)

    lines: list[str] = []
    for t in tables:
        head = [shown(x) for x in ("", *t.columns)]
        body = [[shown(x) for x in (r.label, *(_cell(c, col in t.interval)
                                               for c, col in zip(r.cells, t.columns, strict=True)))]
                for r in t.rows]  # fmt: skip
        if md:
            lines += [f"### {t.title} (report section {t.section})", ""]
            lines.append("| " + " | ".join(head) + " |")
            lines.append("|" + "---|" * len(head))
            lines += ["| " + " | ".join(row) + " |" for row in body]
            lines += [""] + [f"*{shown(n)}*" for n in t.notes] + ([""] if t.notes else [])
        else:
            lines += [f"{t.title} (report section {t.section})"]
            lines += [f"  {line}".rstrip() for line in align([head, *body])]
            lines += [f"  ({shown(n)})" for n in t.notes] + [""]
    if missing:
        lines.append(f"{LACKING}: " + shown("; ".join(missing)))
    if study.duplicates:
        lines.append("set aside (the same arm imported twice): "
                     + shown(", ".join(study.duplicates)))  # fmt: skip
    return "\n".join(lines).rstrip() + "\n"


__all__ = ["FORMATS", "LACKING", "render"]
