"""benchledger's own suites, each one registration: its item option and two lazy factories.

Nothing here imports a suite: the read side loads when a run of it is read, the harness
side (``harness.suites.*``, named by its path: this floor may not import the harness) only
when one runs, so listing the suites or building ``run``'s
options costs no import. A suite of another package registers the same way through the
entry-point group ``benchledger.suites`` (docs/plugins.md).
"""

from __future__ import annotations

from typing import Final

from benchledger.projections.suites.base import ItemOption, ReadSuite, SuitePlugin, register


def _lifecycle_reader() -> ReadSuite:
    from benchledger.projections.suites.lifecycle import SUITE

    return SUITE


def _provenance_reader() -> ReadSuite:
    from benchledger.projections.suites.provenance import SUITE

    return SUITE


def _locomo_reader() -> ReadSuite:
    from benchledger.projections.suites.locomo import SUITE

    return SUITE


def _longmemeval_reader() -> ReadSuite:
    from benchledger.projections.suites.longmemeval import SUITE

    return SUITE


def _tasks_reader() -> ReadSuite:
    from benchledger.projections.suites.tasks import SUITE

    return SUITE


LIFECYCLE: Final = SuitePlugin(
    "lifecycle",
    _lifecycle_reader,
    "benchledger.harness.suites.lifecycle:LifecycleSuite",
    ItemOption("--protocols", "lifecycle: a protocol folder (default: the committed set)"),
    "teach, capture, recall, promote, transfer, update, abstain (the default)",
)
PROVENANCE: Final = SuitePlugin(
    "provenance",
    _provenance_reader,
    "benchledger.harness.suites.provenance:ProvenanceSuite",
    ItemOption(
        "--cases",
        "provenance: a cases .jsonl file or a folder holding cases.jsonl, anywhere "
        "(default: the committed public/v1 split); keeps holdout sets out of the repository",
    ),
    "the provenance lane: each case twice, on fresh platforms (docs/provenance.md)",
)
TASKS: Final = SuitePlugin(
    "tasks",
    _tasks_reader,
    "benchledger.harness.suites.tasks:TasksSuite",
    ItemOption(
        "--tasks",
        "tasks: a task .yaml file or a folder of them (e.g. "
        "../shared/peers/mcp-data-platform/bench/tasks; no default)",
    ),
    "the peer's tasks bench, live (docs/peer-studies.md)",
)
LOCOMO: Final = SuitePlugin(
    "locomo",
    _locomo_reader,
    "benchledger.harness.suites.locomo:LocomoSuite",
    ItemOption(
        "--data",
        "locomo: a LoCoMo file (locomo10.json's format; default: the shipped LoCoMo-shaped "
        "set protocols/data/locomo/synthetic.json)",
    ),
    "LoCoMo's questions on conversations the platform ingested (docs/locomo.md)",
    grading_needs=("nltk",),  # LoCoMo's own Porter stemmer (projections/suites/locomo/grading.py)
)
LONGMEMEVAL: Final = SuitePlugin(
    "longmemeval",
    _longmemeval_reader,
    "benchledger.harness.suites.longmemeval:LongMemEvalSuite",
    ItemOption(
        "--data",
        "locomo: a LoCoMo file (locomo10.json's format; default: the shipped LoCoMo-shaped "
        "set protocols/data/locomo/synthetic.json); longmemeval: a LongMemEval file "
        "(longmemeval_s/_m/_oracle.json's format; default: the shipped LongMemEval-shaped "
        "set protocols/data/longmemeval/synthetic.json)",
    ),
    "LongMemEval's questions, each on its own ingested haystack (docs/longmemeval.md)",
)

_HERE: Final = "benchledger.projections.suites.builtin"
for _plugin in (LIFECYCLE, LOCOMO, LONGMEMEVAL, PROVENANCE, TASKS):
    register(_plugin, where=f"{_HERE}:{_plugin.name.upper()}")
