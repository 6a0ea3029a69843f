"""Rebuild the bad-input corpus files: ``python -m tests.data.bad.make_bad``.

Everything under tests/data/bad/ except ``cases.yaml`` (the hand-written manifest) is
written here, deterministically: bundles (a good sealed run, an unsealed one, an audit
bundle, and every way of breaking them), ledgers that are not ledgers, broken protocol
and case files, and broken peer results files. Each "good" base is checked to be accepted
before its broken variants are written, so a variant fails for the reason it names.
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import random
import shutil
import sqlite3
import sys
import tempfile
from typing import Any

import yaml

from benchledger import protocols
from benchledger.harness.peer.importer import import_peer
from benchledger.harness.peer.tasks_import import import_arm
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.bundle import MAX_LINE, export_audit, export_run
from benchledger.ledger.events import (
    GraderDecisionBody,
    RunStartedBody,
    UnitFinishedBody,
    UnitStartedBody,
)
from benchledger.ledger.verified import open_run
from tests.sample import PASSING, counter_clock, lifecycle_run

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 2615


def _write(rel: str, data: bytes | str) -> None:
    path = os.path.join(HERE, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data.encode() if isinstance(data, str) else data)


def _lines(rel: str) -> list[str]:
    with open(os.path.join(HERE, rel), encoding="utf-8") as fh:
        return fh.read().splitlines()


def _join(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


# -- bundles -------------------------------------------------------------------------------


def bundles() -> None:
    os.makedirs(os.path.join(HERE, "bundles"), exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        led = Ledger(open_store(os.path.join(d, "l.sqlite")), clock=counter_clock())
        outcomes = {(f"p{i}", 1): dict(PASSING) for i in range(1, 5)}
        lifecycle_run(led, "good", outcomes)
        export_run(led, "good", os.path.join(HERE, "bundles", "good.jsonl"))
        export_audit(led, "good", {"good/p2/1"}, os.path.join(HERE, "bundles", "audit.jsonl"))
        led.start_run("open", RunStartedBody(suite="lifecycle", protocols=2))
        w = led.new_stream("open/p1/1")
        w.append(UnitStartedBody(protocol_id="p1", attempt=1))
        w.append(GraderDecisionBody(stage="capture", check="captured", verdict=True, reason="s"))
        w.append(UnitFinishedBody(outcome={"captured": True}))
        led.commit(w)
        export_run(led, "open", os.path.join(HERE, "bundles", "open.jsonl"))
        led.store.close()
    open_run(os.path.join(HERE, "bundles", "good.jsonl"), require_seal=True, allow_partial=False)
    good = _lines("bundles/good.jsonl")
    header, events = good[0], good[1:]
    unit = [i for i, ln in enumerate(good) if '"stream":"good/p2/1"' in ln]
    flipped = [
        ln.replace('"verdict":true', '"verdict":false', 1)
        if '"grader_decision"' in ln and '"good/p2/1"' in ln
        else ln
        for ln in good
    ]
    first_decision = next(i for i, ln in enumerate(good) if '"grader_decision"' in ln)
    one_flip = [*good]
    one_flip[first_decision] = good[first_decision].replace('"verdict":true', '"verdict":false')
    swapped = [*good]
    swapped[unit[1]], swapped[unit[2]] = good[unit[2]], good[unit[1]]
    duplicated = [*good]
    duplicated.insert(unit[2], good[unit[1]])
    spaced = [*good]
    spaced[unit[1]] = json.dumps(json.loads(good[unit[1]]), indent=1).replace("\n", " ")
    seal = next(i for i, ln in enumerate(good) if '"run_sealed"' in ln)
    foreign = [*good]
    foreign.insert(len(foreign), good[unit[0]].replace('"good/p2/1"', '"other/p2/1"'))
    rng = random.Random(SEED)
    variants: dict[str, str | bytes] = {
        "tampered-verdict.jsonl": _join(one_flip),
        "tampered-stream.jsonl": _join(flipped),
        "truncated-mid-chain.jsonl": _join(good[: len(good) // 2]),
        "truncated-last-line.jsonl": _join(good[:-1]),
        "missing-stream.jsonl": _join([ln for i, ln in enumerate(good) if i not in unit]),
        "swapped-lines.jsonl": _join(swapped),
        "duplicated-line.jsonl": _join(duplicated),
        "non-canonical-line.jsonl": _join(spaced),
        "seal-removed.jsonl": _join([ln for i, ln in enumerate(good) if i != seal]),
        "root-mismatch.jsonl": _join(
            [header.replace('"root":"', '"root":"0', 1)[:-2] + '"}', *events]
        ),
        "foreign-stream.jsonl": _join(foreign),
        "trailing-garbage.jsonl": _join([*good, "this line is not an event"]),
        "crlf.jsonl": "\r\n".join(good) + "\r\n",
        "no-header.jsonl": _join(events),
        "header-only.jsonl": _join([header]),
        "empty.jsonl": "",
        "not-json.jsonl": "hello, this is not a bundle\n",
        "wrong-format.jsonl": _join(
            [header.replace("benchledger-bundle/1", "benchledger-bundle/9"), *events]
        ),
        "bad-run-id.jsonl": _join([header.replace('"run":"good"', '"run":"a/b"'), *events]),
        "header-not-object.jsonl": _join(["[1, 2, 3]", *events]),
        "binary-junk.jsonl": bytes(rng.getrandbits(8) for _ in range(512)),
        "garbage.jsonl.gz": b"\x1f\x8b" + bytes(rng.getrandbits(8) for _ in range(400)),
        "truncated.jsonl.gz": gzip.compress(_join(good).encode(), mtime=0)[:300],
    }
    for name, data in variants.items():
        _write(f"bundles/{name}", data)
    audit = _lines("bundles/audit.jsonl")
    _write(
        "bundles/audit-tampered.jsonl",
        _join([ln.replace('"verdict":true', '"verdict":false', 1) for ln in audit]),
    )
    _write("bundles/a-folder.jsonl/README", "a folder named like a bundle\n")


def bounded_bundles() -> None:
    """Bundles past the reader's bounds (ledger/bundle.py MAX_LINE) and damaged gzip."""
    good = _lines("bundles/good.jsonl")
    packed = gzip.compress(_join(good).encode(), mtime=0)
    crc, block = bytearray(packed), bytearray(packed)
    crc[-8] ^= 0xFF  # the trailer's CRC-32
    block[10] ^= 0xFF  # the first deflate block: zlib's own error, not gzip's
    variants = {
        # one space more than a line may hold: 64 MiB of gzip input in a 65 KB file
        "long-line.jsonl.gz": gzip.compress(
            (_join(good[:1]) + " " * (MAX_LINE + 1) + "\n" + _join(good[1:])).encode(), mtime=0
        ),
        "bad-crc.jsonl.gz": bytes(crc),
        "corrupt-deflate.jsonl.gz": bytes(block),
        "blank-line.jsonl": _join([good[0], "", *good[1:]]),
    }
    for name, data in variants.items():
        _write(f"bundles/{name}", data)


# -- ledgers -------------------------------------------------------------------------------


def ledgers() -> None:
    _write("ledgers/not-a-ledger.sqlite", "plain text, not an SQLite database\n")
    _write("ledgers/empty.sqlite", b"")  # zero bytes: what `touch` or a failed copy leaves
    path = os.path.join(HERE, "ledgers", "other-app.sqlite")
    if os.path.exists(path):
        os.unlink(path)
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE recipes (name TEXT PRIMARY KEY, minutes INTEGER)")
    conn.execute("INSERT INTO recipes VALUES ('soup', 30)")
    conn.commit()
    conn.close()


# -- protocols -----------------------------------------------------------------------------


def _protocol(name: str = "bl-keystone-region") -> dict[str, Any]:
    with open(os.path.join(protocols.LIFECYCLE_DIR, f"{name}.yaml"), encoding="utf-8") as fh:
        data: dict[str, Any] = yaml.safe_load(fh)
    return data


def _yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=4096)


def protocol_files() -> None:
    base = _protocol()
    update = _protocol(
        next(
            n[:-5]
            for n in sorted(os.listdir(protocols.LIFECYCLE_DIR))
            if "update" in _protocol(n[:-5])
        )
    )
    protocols.load(os.path.join(protocols.LIFECYCLE_DIR, "bl-keystone-region.yaml"))

    def variant(change: Any, data: dict[str, Any] | None = None) -> str:
        d = copy.deepcopy(data or base)
        change(d)
        return _yaml(d)

    files: dict[str, str | bytes] = {
        "yaml-syntax.yaml": "id: broken\ntitle: [unclosed\nfact: x\n",
        "empty.yaml": "",
        "unknown-field.yaml": variant(lambda d: d.update(colour="blue")),
        "missing-id.yaml": variant(lambda d: d.pop("id")),
        "bad-sink.yaml": variant(lambda d: d.update(sink="postgres")),
        "zero-budget.yaml": variant(lambda d: d.update(budget_tool_calls=0)),
        "budget-text.yaml": variant(lambda d: d.update(budget_tool_calls="many")),
        "numeric-no-value.yaml": variant(
            lambda d: d["recall"].update(grading={"kind": "numeric", "abs_tolerance": 1})
        ),
        "entity-no-aliases.yaml": variant(lambda d: d["recall"]["grading"].update(aliases=[])),
        "alias-clash.yaml": variant(
            lambda d: d["recall"]["grading"].update(wrong_aliases=["West"])
        ),
        "transfer-and-update.yaml": variant(lambda d: d.update(update=update["update"])),
        "negative-tolerance.yaml": variant(
            lambda d: d["recall"].update(
                grading={"kind": "numeric", "value": 3, "abs_tolerance": -1}
            )
        ),
        "bad-grading-kind.yaml": variant(lambda d: d["recall"]["grading"].update(kind="fuzzy")),
        "page-missing.yaml": variant(lambda d: d.update(sink="knowledge_page")),
        "prompt-not-text.yaml": variant(lambda d: d["teach"].update(prompt=42)),
        "missing-recall.yaml": variant(lambda d: d.pop("recall")),
        "list-of-strings.yaml": "- just\n- some\n- words\n",
        "not-utf8.yaml": b"id: caf\xe9\ntitle: \xff\xfe\n",
        "json-syntax.json": '{"id": "broken", "title": }\n',
        "a-number.yaml": "42\n",
        "stale-value-type.yaml": variant(
            lambda d: d["update"].update(superseded_value=["x"]), update
        ),
    }
    for name, data in files.items():
        _write(f"protocols/{name}", data)
    # One good protocol, for the cases whose input is bad elsewhere (a broken platform).
    _write("protocols-good/bl-keystone-region.yaml", _yaml(base))
    _write("protocols/duplicate-ids/a.yaml", _yaml(base))
    _write("protocols/duplicate-ids/b.yaml", _yaml(base))
    _write("protocols/empty-folder/README.txt", "no protocols in this folder\n")


# -- provenance cases ----------------------------------------------------------------------


def case_files() -> None:
    good = {
        "id": "BAD-001",
        "category": "pack_axiom",
        "prime": [],
        "prompt": "What does the discount column record?",
        "expected_sources": ["pack"],
    }

    def line(**change: Any) -> str:
        row = {**good, **change}
        return json.dumps({k: v for k, v in row.items() if v is not None})

    files = {
        "not-json.jsonl": "{this is not json\n",
        "empty.jsonl": "",
        "not-object.jsonl": "[1, 2]\n",
        "missing-prompt.jsonl": line(prompt=None) + "\n",
        "bad-category.jsonl": line(category="trivia") + "\n",
        "unknown-source.jsonl": line(expected_sources=["wiki"]) + "\n",
        "no-sources.jsonl": line(expected_sources=[]) + "\n",
        "unknown-field.jsonl": line(colour="blue") + "\n",
        "duplicate-id.jsonl": line() + "\n" + line() + "\n",
        "vault-without-prime.jsonl": line(category="mixed", expected_sources=["pack", "vault"])
        + "\n",
    }
    for name, data in files.items():
        _write(f"cases/{name}", data)


# -- peer results files --------------------------------------------------------------------


def _peer_record(pid: str = "lc-net-revenue") -> dict[str, Any]:
    episodes = [
        {
            "stage": s,
            "identity": "teacher",
            "email": "bench-agent-001@apikey.local",
            "final_answer": "FINAL ANSWER: 12",
            "tool_calls": 2,
            "search_called": True,
        }
        for s in ("teach", "recall", "abstain")
    ]
    return {
        "protocol_id": pid,
        "attempt": 1,
        "episodes": episodes,
        "capture_attempted": True,
        "captured": True,
        "recall_correct": True,
        "recall_surfaced": True,
        "promoted": None,
        "abstain_correct": True,
        "error": None,
    }


def peer_files() -> None:
    good = {
        "manifest": {
            "k": 1,
            "started_at": "2026-01-02T03:04:05Z",
            "llm_provider": "anthropic",
            "model": "claude",
            "platform_version": "v1",
        },
        "metrics": {},
        "runs": [_peer_record(), _peer_record("lc-order-count")],
    }
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "good.json")
        with open(path, "w") as fh:
            json.dump(good, fh)
        with open_store(":memory:") as store:
            import_peer(Ledger(store), path, transcripts=[])  # the base is accepted

    def variant(change: Any) -> str:
        d = copy.deepcopy(good)
        change(d)
        return json.dumps(d, indent=1)

    files = {
        "not-json.json": "{ this is not json",
        "empty.json": "",
        "top-level-list.json": "[]",
        "captured-no.json": variant(lambda d: d["runs"][0].update(captured="no")),
        "k-negative.json": variant(lambda d: d["manifest"].update(k=-3)),
        "k-text.json": variant(lambda d: d["manifest"].update(k="two")),
        "k-too-small.json": variant(lambda d: d["runs"][1].update(attempt=3)),
        "runs-missing.json": variant(lambda d: d.pop("runs")),
        "runs-empty.json": variant(lambda d: d.update(runs=[])),
        "manifest-missing.json": variant(lambda d: d.pop("manifest")),
        "record-no-protocol.json": variant(lambda d: d["runs"][0].pop("protocol_id")),
        "protocol-with-slash.json": variant(lambda d: d["runs"][0].update(protocol_id="a/b")),
        "attempt-zero.json": variant(lambda d: d["runs"][0].update(attempt=0)),
        "episodes-missing.json": variant(lambda d: d["runs"][0].pop("episodes")),
        "episode-no-stage.json": variant(lambda d: d["runs"][0]["episodes"][0].pop("stage")),
        "tool-calls-negative.json": variant(
            lambda d: d["runs"][0]["episodes"][0].update(tool_calls=-1)
        ),
        "error-not-text.json": variant(lambda d: d["runs"][0].update(error=["boom"])),
        "started-at-garbage.json": variant(lambda d: d["manifest"].update(started_at="yesterday")),
        "metrics-not-object.json": variant(lambda d: d.update(metrics=[1])),
    }
    for name, data in files.items():
        _write(f"peer/{name}", data)


# A pkrun arm (issue 50), beside peer/ (a folder of no arm, a case of its own): its world
# file as the peer's fixture service serves it (docs/peer-studies.md), its planted claim,
# two attempts and no transcripts.
_PK_WORLD = (
    '{"profile":"monitors-3","monitors":3,"listening":"granted","contract":"2026.1",'
    '"workspace_scoped":false,"workspaces":2}\n'
)
_PK_NEEDLE = "account has 5 listening monitors provisioned"


def pk_arms() -> None:
    results = {
        "manifest": {"model": "haiku", "llm_provider": "claude-cli", "k": 2},
        "attempts": [
            {"question_id": "monitor-count", "replicate": n, "final_answer": "FINAL ANSWER: 3"}
            for n in (1, 2)
        ],
    }
    planted = {"treatment_id": "t", "insight_id": "i", "text": f"The {_PK_NEEDLE}.",
               "needle": _PK_NEEDLE}  # fmt: skip
    huge = "1" + "0" * 400
    count_world = _PK_WORLD.replace('"monitors":3', '"monitors":' + huge)
    huge_needle = f"account has {huge} listening monitors provisioned"
    arms = {
        "world-pool-400-digits": ('{"monitor_pool":' + huge + "," + _PK_WORLD[1:], planted),
        "world-count-400-digits": (count_world, planted),
        "planted-400-digits": (_PK_WORLD, {**planted, "needle": huge_needle}),
    }
    with tempfile.TemporaryDirectory() as d:  # the base is accepted
        for name, data in (("results.json", json.dumps(results)), ("fixture-world.json",
                           _PK_WORLD), ("planted.json", json.dumps(planted))):  # fmt: skip
            with open(os.path.join(d, name), "w") as fh:
                fh.write(data)
        with open_store(":memory:") as store:
            import_arm(Ledger(store), d)
    for arm, (world, plant) in arms.items():
        _write(f"pkrun/{arm}/results.json", json.dumps(results, indent=1))
        _write(f"pkrun/{arm}/fixture-world.json", world)
        _write(f"pkrun/{arm}/planted.json", json.dumps(plant, indent=1))


# -- LoCoMo files ----------------------------------------------------------------------------


def locomo_files() -> None:
    """The shipped LoCoMo-shaped set's first conversation, broken as issue 50 found real
    files could be (each was a traceback, or a run whose every metric was n/a)."""
    from benchledger.protocols import locomo

    with open(os.path.join(protocols.DATA_DIR, "locomo", "synthetic.json"), "rb") as fh:
        good = json.loads(fh.read())[:1]
    locomo.parse(json.dumps(good).encode(), "good.json")  # the base is accepted

    def variant(change: Any) -> str:
        d = copy.deepcopy(good)
        change(d[0])
        return json.dumps(d, indent=1)

    def renamed(new: str) -> Any:
        def go(sample: dict[str, Any]) -> None:
            conv = sample["conversation"]
            conv[new] = conv.pop("session_2")
            conv[f"{new}_date_time"] = conv.pop("session_2_date_time")

        return go

    files = {
        "session-leading-zero.json": variant(renamed("session_02")),
        "session-other-digit.json": variant(renamed("session_\u0662")),
        "category-float.json": variant(lambda d: d["qa"][0].update(category=1.0)),
        "long-integer.json": variant(lambda d: d["qa"][0].update(answer=0)).replace(
            '"answer": 0', '"answer": ' + "7" * 4400, 1
        ),
    }
    for name, data in files.items():
        _write(f"locomo/{name}", data)


def main() -> None:
    for sub in ("bundles", "ledgers", "protocols", "protocols-good", "cases", "peer", "locomo"):
        shutil.rmtree(os.path.join(HERE, sub), ignore_errors=True)
    bundles()
    bounded_bundles()
    ledgers()
    protocol_files()
    case_files()
    peer_files()
    pk_arms()
    locomo_files()
    print(f"wrote the bad-input corpus under {HERE}", file=sys.stderr)


if __name__ == "__main__":
    main()
