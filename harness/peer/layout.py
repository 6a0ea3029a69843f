"""Where a recorded run's files are: ``passes.txt``, each pass's results and transcripts,
and the protocol set it was run with.

The peer writes ``passes.txt`` lines relative to its repository root; a pass's
transcripts are the ``.transcripts`` folder beside its results file. Transcript folders
given by hand must match the passes one to one, or a pass would carry another pass's
transcripts. Its protocols are ``bench/protocols``, beside the ``bench/results`` folder
that holds every run.
"""

from __future__ import annotations

import glob
import os
import re
from typing import Any, Final

from benchledger.harness.peer.files import peer_json, peer_text
from benchledger.harness.peer.results import Fields, attempt_of
from benchledger.ledger import UnusableInput

PASSES: Final = "passes.txt"
RESULTS_DIR: Final = "results"
PROTOCOLS_DIR: Final = "protocols"
SEED_SQL: Final = os.path.join("seed", "trino", "setup.sql")  # the tasks' seeded warehouse
_PASS_NAME: Final = re.compile(r"(?<![a-z0-9])pass[-_ ]?0*([1-9][0-9]*)(?![0-9])", re.IGNORECASE)


def read_json(path: str, what: str) -> Any:
    """The JSON in ``path``; ValueError naming ``what`` and the path if unreadable."""
    try:
        return peer_json(path)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"recorded run: cannot read {what} {path} ({exc})") from None


def _pass_file(listing: str, line: str) -> str:
    """Where a ``passes.txt`` line points; ValueError saying what to copy if nowhere."""
    found = find_pass_file(listing, line)
    if found is None:
        raise ValueError(
            f"recorded run: {listing} names {line!r}, which is not a file beside it or below "
            "any folder above it: copy the whole result folder"
        )
    return found


def results_files(run_dir: str) -> list[str]:
    """The run's per-pass results files in pass order; ValueError naming the path if none."""
    if os.path.isfile(run_dir):
        return [run_dir]
    if not os.path.isdir(run_dir):
        raise ValueError(
            f"--agent recorded:{run_dir}: no such folder; name a recorded run, e.g. "
            "../shared/peers/mcp-data-platform/bench/results/s5-anthropic-k5"
        )
    listing = os.path.join(run_dir, PASSES)
    if os.path.isfile(listing):
        try:
            lines = [raw.strip() for raw in peer_text(listing).splitlines() if raw.strip()]
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"recorded run: cannot read {listing} ({exc})") from None
        if not lines:
            raise ValueError(f"recorded run: {listing} lists no passes")
        return [_pass_file(listing, line) for line in lines]
    single = sorted(
        f for f in glob.glob(os.path.join(run_dir, "*.json")) if os.path.isdir(f + ".transcripts")
    )
    if len(single) != 1:
        raise ValueError(
            f"--agent recorded:{run_dir}: expected a {PASSES} or exactly one results file with "
            f"its .transcripts folder, found {len(single)}"
        )
    return single


def _listed_passes(results: str) -> dict[str, int]:
    """Each pass's transcript folder (real path) -> its pass, from the ``passes.txt`` beside."""
    listing = os.path.join(os.path.dirname(os.path.abspath(results)), PASSES)
    try:
        lines = [raw.strip() for raw in peer_text(listing).splitlines() if raw.strip()]
    except (OSError, UnicodeDecodeError):
        return {}  # no listing: folders can still be named pass-N
    out: dict[str, int] = {}
    for n, line in enumerate(lines, 1):
        found = find_pass_file(listing, line)
        if found is not None:
            out.setdefault(os.path.realpath(found + ".transcripts"), n)
    return out


def _named_pass(f: Fields, folder: str, listed: dict[str, int]) -> int | None:
    """The pass a transcript folder is named for, or None when its name says none.

    Named: the ``.transcripts`` folder of ``passes.txt`` line N (the peer's layout), or
    one ``pass-N``/``passN`` in its name (or, for ``*.transcripts``, its parent's name).
    """
    given = os.path.abspath(folder)
    name = os.path.basename(given.rstrip(os.sep))
    claims = {int(n) for n in _PASS_NAME.findall(name)}
    if not claims and name.endswith(".transcripts"):
        claims = {int(n) for n in _PASS_NAME.findall(os.path.basename(os.path.dirname(given)))}
    by_name = claims.pop() if len(claims) == 1 else None
    by_listing = listed.get(os.path.realpath(folder))
    if by_name is not None and by_listing is not None and by_name != by_listing:
        raise UnusableInput(
            f.path,
            f"transcript folder {folder} is named for pass {by_name} but passes.txt lists "
            f"it as pass {by_listing}",
        )
    return by_listing if by_listing is not None else by_name


def match_transcripts(f: Fields, records: list[dict[str, Any]], dirs: list[str]) -> dict[int, str]:
    """Each pass's transcript folder by attempt; refused unless they match one to one.

    A folder copied onto a pass it is not would seal wrong evidence into the run, so
    the count must equal the passes; folders each named for their pass may come in any
    order, others are taken in attempt order.
    """
    if not dirs:
        return {}
    passes = max(attempt_of(f, i, r) for i, r in enumerate(records))
    if len(dirs) != passes:
        plural = "pass" if passes == 1 else "passes"
        given = "folder was" if len(dirs) == 1 else "folders were"
        raise UnusableInput(
            f.path,
            f"the results have {passes} {plural} but {len(dirs)} transcript {given} given: "
            "give one --transcripts folder per pass, in attempt order or each named for "
            "its pass",
        )
    if passes == 1:
        return {1: dirs[0]}  # a pass's own file records attempt 1 whatever its pass was
    listed = _listed_passes(f.path)
    named = [_named_pass(f, d, listed) for d in dirs]
    picked = [n for n in named if n is not None]
    if len(picked) == len(dirs):
        by_pass: dict[int, str] = {}
        for folder, n in zip(dirs, picked, strict=True):
            if n > passes:
                raise UnusableInput(
                    f.path,
                    f"transcript folder {folder} is named for pass {n} but the results "
                    f"have {passes} passes",
                )
            if n in by_pass:
                raise UnusableInput(
                    f.path,
                    f"transcript folders {by_pass[n]} and {folder} are both named for pass {n}",
                )
            by_pass[n] = folder
        return by_pass
    for j, (folder, claim) in enumerate(zip(dirs, named, strict=True), 1):
        if claim is not None and claim != j:
            raise UnusableInput(
                f.path,
                f"transcript folder {j} of {passes} ({folder}) is named for pass {claim}: give "
                "the folders in attempt order, or each named for its pass",
            )
    return dict(enumerate(dirs, 1))


def find_pass_file(listing: str, line: str) -> str | None:
    """Where a ``passes.txt`` line points (a pass's results file), or None if nowhere.

    The peer writes these paths relative to its repository root; they are looked up
    beside ``passes.txt``, under each folder above it, and as ``FOLDER/FILE`` beside it.
    """
    here = os.path.dirname(os.path.abspath(listing))
    candidates = [line] if os.path.isabs(line) else []
    folder = here
    while True:
        candidates.append(os.path.join(folder, line))
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    parts = line.replace("\\", "/").rstrip("/").split("/")
    candidates.append(os.path.join(here, *parts[-2:]))
    found = next((c for c in candidates if os.path.isfile(c)), None)
    return None if found is None else os.path.normpath(found)


def _pass_results(listing: str, n: int, line: str) -> str:
    """Where line ``n`` of a ``passes.txt`` points; UnusableInput naming the line if nowhere."""
    found = find_pass_file(listing, line)
    if found is None:
        raise UnusableInput(
            listing, f"{line!r} names no pass results file here or in a folder above", line=n
        )
    return found


def find_transcripts(results: str) -> list[str]:
    """The transcript folders of a results file, in attempt order ([] when there are none).

    ``RESULTS.json.transcripts`` beside the file; for a merged multi-pass file without
    one, each pass's ``lifecycle-*.json.transcripts`` from the ``passes.txt`` beside it
    (line j is pass j, which the merged file records as attempt j).
    """
    own = results + ".transcripts"
    if os.path.isdir(own):
        return [own]
    listing = os.path.join(os.path.dirname(os.path.abspath(results)), PASSES)
    if not os.path.isfile(listing) or not _is_merged(results):
        return []
    try:
        text = peer_text(listing).splitlines()
        lines = [(n, raw.strip()) for n, raw in enumerate(text, 1) if raw.strip()]
    except (OSError, UnicodeDecodeError) as exc:
        raise UnusableInput(listing, f"cannot read ({exc})") from None
    folders = []
    for n, line in lines:
        folder = _pass_results(listing, n, line) + ".transcripts"
        if not os.path.isdir(folder):
            raise UnusableInput(
                listing,
                f"pass {n} has no transcript folder {folder}; give --transcripts DIR once "
                "per pass instead",
                line=n,
            )
        folders.append(folder)
    return folders


def _is_merged(results: str) -> bool:
    """Whether a results file holds several passes (a run record with attempt > 1)."""
    try:
        data = peer_json(results)
    except (OSError, ValueError):
        return False  # import_peer reports the file itself
    runs = data.get("runs") if isinstance(data, dict) else None
    return isinstance(runs, list) and any(
        isinstance(r, dict) and isinstance(r.get("attempt"), int) and r["attempt"] > 1 for r in runs
    )


def beside_results(results: str, name: str) -> str | None:
    """``name`` (a folder or file path) beside the ``results`` folder above ``results``, or None.

    Spelled as ``results`` is: absolute for an absolute path, else relative to here,
    as a benchledger run records the ``--protocols`` it was given.
    """
    folder = os.path.dirname(os.path.abspath(results))
    while True:
        parent = os.path.dirname(folder)
        beside = os.path.join(parent, name)
        if os.path.basename(folder) == RESULTS_DIR and os.path.exists(beside):
            return beside if os.path.isabs(results) else os.path.relpath(beside)
        if parent == folder:
            return None
        folder = parent


def find_protocols(results: str) -> str | None:
    """The protocol folder beside the ``results`` folder above a results file, or None."""
    found = beside_results(results, PROTOCOLS_DIR)
    return found if found is not None and os.path.isdir(found) else None


def find_seed(results: str) -> str | None:
    """The seeded warehouse's ``seed/trino/setup.sql`` beside the ``results`` folder, or None."""
    return beside_results(results, SEED_SQL)
