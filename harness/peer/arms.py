"""The arm folders of a peer study family and what each folder's name says.

A family (``knowledge-pollution/rq1-warehouse``) is a folder of arm folders; an arm
folder holds ``results.json`` and ``arm-config.yaml``. The peer keeps attempts it did
not analyse beside the analysed arm under a labelled name (``convention-absent-haiku-
DRIFTED-1``): the label is the trailing run of dash-separated parts that starts with an
upper-case word (``DRIFTED-1``, ``AUDIT-TIMEOUT-0``, ``INTERRUPTED-bells``), so a
lower-case level such as ``checkable-wrong-haiku-bare`` is an arm of its own. What a
label means is read from the family README's backquoted ``-LABEL-n`` (meaning) list.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Final

from ledger import UnusableInput

RESULTS: Final = "results.json"
ARM_CONFIG: Final = "arm-config.yaml"
README: Final = "README.md"
_LABEL: Final = re.compile(
    r"^(?P<arm>.+?)-(?P<label>[A-Z][A-Z0-9]*(?:-[A-Z][A-Z0-9]*)*(?:-[a-z0-9]+)?)$"
)
# "`-DRIFTED-n` (an evaluator write ...)": the placeholder n stands for a number.
_MEANING: Final = re.compile(r"`-(?P<label>[A-Z][A-Za-z0-9-]*)`\s*\((?P<meaning>[^()]*)\)")
_README_LIMIT: Final = 1 << 20  # a README is prose; a larger file is not one


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


def is_arm(path: str) -> bool:
    """Whether ``path`` is an arm folder (it holds results.json and arm-config.yaml)."""
    return all(os.path.isfile(os.path.join(path, name)) for name in (RESULTS, ARM_CONFIG))


def is_family(path: str) -> bool:
    """Whether ``path`` is a family: a folder, not itself an arm, with an arm folder in it."""
    if not os.path.isdir(path) or is_arm(path):
        return False
    return any(is_arm(os.path.join(path, name)) for name in os.listdir(path))


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
            family_dir, f"holds no arm folder (a folder with {RESULTS} and {ARM_CONFIG})"
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
    path = os.path.join(family_dir, README)
    try:
        if os.path.getsize(path) > _README_LIMIT:
            return {}
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError):
        return {}  # a family without a README: labels stand for themselves
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
    """The ArmName of the folder ``arm_dir``."""
    folder = os.path.basename(os.path.normpath(arm_dir))
    arm, label = split_label(folder)
    return ArmName(folder, arm, label, meaning_of(label, meanings) if label else "")
