"""The arm folders of a peer study family and what each folder's name says.

A family is a folder of arm folders; an arm folder holds ``results.json`` (or
``results/results.json``, ``arm_files``), and may hold ``arm-config.yaml``, ``tasks/``,
``planted.json`` and store snapshots (what it lacks is stated in its run). The peer keeps
attempts it did not analyse beside the analysed arm under a labelled name (``<arm>-
DRIFTED-1``): the label is the trailing run of dash-separated parts that starts with an
upper-case word (``DRIFTED-1``, ``AUDIT-TIMEOUT-0``, ``INTERRUPTED-bells``), so a
lower-case suffix (a directive level) names an arm of its own. What a label means is read
from the family README's backquoted ``-LABEL-n`` (meaning) list.

A flat family is a folder of results files ``<arm>.json`` beside their
``<arm>.json.transcripts`` folders, with no tasks, planted claim or arm config of their
own. Its README states the planted claim once (the blockquote under a "treatment string"
heading) and which arms planted it (the numbered ``**arm** —`` design list: an arm whose
entry says it "plants" the claim).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Final

from benchledger.harness.peer.files import peer_json, peer_text
from benchledger.ledger import UnusableInput

RESULTS: Final = "results.json"
ARM_CONFIG: Final = "arm-config.yaml"
README: Final = "README.md"
TRANSCRIPTS: Final = ".transcripts"  # a results file's transcript folder: its name plus this
_PEEK_LIMIT: Final = 32 << 20  # a results file larger than this is no arm's (tasks_import)
_LABEL: Final = re.compile(
    r"^(?P<arm>.+?)-(?P<label>[A-Z][A-Z0-9]*(?:-[A-Z][A-Z0-9]*)*(?:-[a-z0-9]+)?)$"
)
# "`-DRIFTED-n` (an evaluator write ...)": the placeholder n stands for a number.
_MEANING: Final = re.compile(r"`-(?P<label>[A-Z][A-Za-z0-9-]*)`\s*\((?P<meaning>[^()]*)\)")
_README_LIMIT: Final = 1 << 20  # a README is prose; a larger file is not one
# A flat family README's claim: a "> " blockquote right under a heading naming the treatment
# string.
_CLAIM: Final = re.compile(
    r"^#+[^\n]*treatment string[^\n]*\n\s*(?P<quote>(?:>[^\n]*(?:\n|$))+)",
    re.IGNORECASE | re.MULTILINE,
)
# "1. **<arm>** — after ... plants the ... fact ...": one design-list entry per arm.
_DESIGN: Final = re.compile(
    r"^\d+\.\s+\*\*(?P<arm>[^*\n]+)\*\*\s*[—–-]+\s*(?P<what>.*?)(?=^\d+\.\s|^\S|\Z)",
    re.MULTILINE | re.DOTALL,
)
_PLANTS: Final = re.compile(r"\bplants\b", re.IGNORECASE)


@dataclass(frozen=True)
class ArmName:
    """An arm folder's name split: the arm, its exclusion label ("" when analysed) and
    the label's meaning (the README's words, else the label itself)."""

    folder: str
    arm: str
    label: str = ""
    exclusion: str = ""

    @property
    def excluded(self) -> bool:
        return bool(self.label)


RESULTS_DIR: Final = "results"  # the later layout: results/results.json, results/transcripts/
TRANSCRIPTS_DIR: Final = "transcripts"


def arm_files(path: str) -> tuple[str, str] | None:
    """An arm folder's (results file, transcript folder), in either layout the peer's
    ``load_arm`` reads (``results.json`` beside ``results.json.transcripts``, or
    ``results/results.json`` beside ``results/transcripts``); None for any other folder."""
    own = os.path.join(path, RESULTS)
    if os.path.isfile(own):
        return own, own + TRANSCRIPTS
    sub = os.path.join(path, RESULTS_DIR, RESULTS)
    if os.path.isfile(sub):
        return sub, os.path.join(path, RESULTS_DIR, TRANSCRIPTS_DIR)
    return None


def is_arm(path: str) -> bool:
    """Whether ``path`` is an arm folder (it holds a results file, ``arm_files``)."""
    return os.path.isdir(path) and arm_files(path) is not None


def is_family(path: str) -> bool:
    """Whether ``path`` is a family: a folder, not itself an arm, with an arm folder in it,
    or a flat family (``flat_arms``)."""
    if not os.path.isdir(path) or is_arm(path):
        return False
    return any(is_arm(os.path.join(path, name)) for name in os.listdir(path)) or bool(
        flat_arms(path)
    )


def _is_tasks_results(path: str) -> bool:
    """Whether ``path`` reads as a tasks results file (an object with ``attempts``): a
    lifecycle pass folder has the same file-and-transcripts layout with ``runs``."""
    try:
        if os.path.getsize(path) > _PEEK_LIMIT:
            return False
        data = peer_json(path)
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(data, dict) and isinstance(data.get("attempts"), list)


def flat_arms(family_dir: str) -> list[str]:
    """The results files of a flat family (``<arm>.json`` beside ``<arm>.json.transcripts``,
    holding tasks attempts), sorted; [] for any other folder, an arm or one with arm folders."""
    if not os.path.isdir(family_dir) or is_arm(family_dir):
        return []
    names = sorted(os.listdir(family_dir))
    if any(is_arm(os.path.join(family_dir, n)) for n in names):
        return []
    return [
        os.path.join(family_dir, n)
        for n in names
        if n.endswith(".json")
        and os.path.isdir(os.path.join(family_dir, n + TRANSCRIPTS))
        and _is_tasks_results(os.path.join(family_dir, n))
    ]


def _readme(family_dir: str) -> str:
    """The family README's text; "" when absent, unreadable or too large to be prose."""
    path = os.path.join(family_dir, README)
    try:
        if os.path.getsize(path) > _README_LIMIT:
            return ""
        return peer_text(path)
    except (OSError, UnicodeDecodeError):
        return ""


def readme_claim(family_dir: str) -> tuple[str, frozenset[str]] | None:
    """The claim a flat family's README says was planted and the arms that planted it;
    None when the README states no treatment string."""
    text = _readme(family_dir)
    quote = _CLAIM.search(text)
    if quote is None:
        return None
    lines = (line.lstrip(">").strip() for line in quote["quote"].splitlines())
    claim = " ".join(line for line in lines if line)
    planting = frozenset(
        m["arm"].strip() for m in _DESIGN.finditer(text) if _PLANTS.search(m["what"])
    )
    return claim, planting


def arm_folders(family_dir: str) -> list[str]:
    """The family's arm folders (its direct children that are arms), sorted by name.

    UnusableInput when ``family_dir`` is not a folder or holds no arm. Folders inside
    an arm folder are not the family's (the peer left one such copy in an excluded arm).
    """
    if not os.path.isdir(family_dir):
        raise UnusableInput(family_dir, "no such folder (name a family of arm folders)")
    found = sorted(
        os.path.join(family_dir, name)
        for name in os.listdir(family_dir)
        if is_arm(os.path.join(family_dir, name))
    )
    if not found:
        raise UnusableInput(
            family_dir,
            f"holds no arm folder (a folder with {RESULTS} or {RESULTS_DIR}/{RESULTS})",
        )
    return found


def split_label(folder: str) -> tuple[str, str]:
    """(arm, label) of a folder name; the label is "" for an analysed arm."""
    match = _LABEL.match(folder)
    if match is None:
        return folder, ""
    return match["arm"], match["label"]


def label_meanings(family_dir: str) -> dict[str, str]:
    """Each label pattern the family README states (``DRIFTED-n``) -> its meaning."""
    text = _readme(family_dir)  # a family without a README: labels stand for themselves
    return {m["label"]: " ".join(m["meaning"].split()) for m in _MEANING.finditer(text)}


def meaning_of(label: str, meanings: dict[str, str]) -> str:
    """What ``label`` means by the README's list (``n`` matching a number), else the label."""
    for pattern, meaning in meanings.items():
        if pattern == label:
            return meaning
        if pattern.endswith("-n") and re.fullmatch(re.escape(pattern[:-1]) + r"[0-9]+", label):
            return meaning
    return label


def name_of(arm_dir: str, meanings: dict[str, str]) -> ArmName:
    """The ArmName of the folder ``arm_dir`` (or of a flat family's ``<arm>.json``)."""
    folder = os.path.basename(os.path.normpath(arm_dir)).removesuffix(".json")
    arm, label = split_label(folder)
    return ArmName(folder, arm, label, meaning_of(label, meanings) if label else "")
