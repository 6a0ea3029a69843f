"""The run record: what a run was started with, built from the request, read back whole.

``RunConfig`` is what the user asked for (secrets included, never stored);
``RunRecord`` (ledger/events.py) is what the ledger keeps. Resume restores a run from
its record and refuses, naming the field, any option that contradicts it.
"""

from __future__ import annotations

import hmac
import os
import re
import secrets
import shlex
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, NamedTuple

import blake3
import msgspec

from benchledger.harness.errors import HarnessError
from benchledger.harness.platforms.platform import PlatformSpec
from benchledger.harness.settings import Settings
from benchledger.ledger import Ledger
from benchledger.ledger.events import (
    Preregistration,
    RunRecord,
    RunStartedEvent,
    UnitStartedEvent,
)

REDACTED: Final = "<redacted>"
_SECRET_NAME = re.compile(r"(?i)(key|token|secret|passw|pwd|auth|credential)")
_SECRET_VALUE = re.compile(r"(?i)^(sk-|ghp_|xox[bp]-|eyJ)|^[A-Za-z0-9_\-]{32,}$")
_URL_PASSWORD = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@\s]+):[^@/\s]+@")
_POOL_LABEL = re.compile(r"^pool:(\d+)\b")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")  # VAR=value before a program
_RESET_DOMAIN = b"benchledger:reset-cmd:v1\x00"


class RunRefused(HarnessError):
    """The run cannot start or resume as asked (pool too small, contradicts its record, ...):
    unusable input, exit 2; nothing was written."""

    exit_code: ClassVar[int] = 2


@dataclass
class RunConfig:
    """What the user asked for. ``given`` names the options set explicitly (for resume)."""

    protocols_path: str = ""
    # The item options that named ``protocols_path`` (``--protocols``, ``--cases``, ...):
    # one not the run's suite's is refused (``harness.suites.check_items_options``; none
    # when not given on a command line).
    items_options: tuple[str, ...] = ()
    agent: str = "scripted"
    platform: str = "embedded"
    # The chosen platform's own options by name (``--server-memory-cmd`` ->
    # ``server_memory_cmd``), as its ``Platform.options`` declare them.
    platform_options: dict[str, str] = field(default_factory=dict)
    admin_key: str = ""
    pool_base: str = ""
    pool_size: int = 0
    k: int = 1
    concurrency: int = 4
    run_id: str = ""
    reset_cmd: str = ""
    capture_timeout_s: float = 10.0
    resume: str = ""
    suite: str = "lifecycle"
    runtime_scope: str = "pass"
    pack: str = ""  # the embedded platform's seed pack folder ("" = benchledger's own)
    given: frozenset[str] = field(default_factory=frozenset)
    # Model agents: sampling params (recorded, effective values); server, limits and keys
    # (not recorded: give them again on resume).
    agent_params: dict[str, Any] = field(default_factory=dict)
    base_url: str = ""
    rpm: int = 0
    tpm: int = 0
    time_scale: float = 1.0  # recorded agents: their recorded latencies times this
    settings: Settings | None = field(default=None, repr=False)
    prereg: Preregistration | None = None  # the gate bar recorded in run_started (new runs)
    protocol: list[str] = field(default_factory=list)  # --protocol ID...: a subset run's ids
    limit: int = 0  # --limit N: the first N (of those) only; 0 = all
    retry_infra: bool = False  # resume: re-run units whose every attempt infra-failed
    # Seal even when units ended in infrastructure errors (else the run stays unsealed so
    # they can be retried); a sealing decision, not recorded.
    seal_despite_infra: bool = False
    # Print each harness failure's traceback as it is written to the run's failure log
    # (``run --debug``); not recorded.
    debug: bool = False
    # A queue worker (``benchledger worker``): its protocol and pack paths and its
    # concurrency are its own (the set and the pack are compared by hash).
    local: bool = False
    # The locomo suite: ``--search-k`` (0: the suite's default) and ``--context-budget``
    # (0: the full-context control's default), recorded in the run record.
    search_k: int = 0
    context_budget: int = 0
    # ``--judge SPEC`` and its settings (harness/judge.py; recorded in ``RunRecord.judge``).
    judge: str = ""
    judge_prompt: str = ""  # a shipped prompt's name ("" : lenient)
    judge_prompt_path: str = ""  # --judge-prompt FILE
    judge_samples: int = 1
    judge_temperature: float = 0.0
    judge_seed: int | None = None


class Restored(NamedTuple):
    """One option a resume restores from the run record: the record field it is kept in
    ("" when compared otherwise: the platform by its label, the reset command by digest)
    and the command-line options (argparse names) that set it."""

    record: str
    options: tuple[str, ...]


# RunConfig field -> how a resume restores it: options a resume may repeat but not change.
# The one table: the command line marks what was given by it, ``contradictions`` checks it.
RESTORED: Final = {
    "protocols_path": Restored("protocols_path", ("protocols", "cases", "tasks", "data")),
    "agent": Restored("agent", ("agent",)),
    "k": Restored("k", ("k",)),
    "pool_size": Restored("pool_size", ("pool_size",)),
    "concurrency": Restored("concurrency", ("concurrency",)),
    "capture_timeout_s": Restored("capture_timeout_s", ()),
    "suite": Restored("suite", ()),
    "runtime_scope": Restored("runtime_scope", ("platform_scope",)),
    "pack": Restored("pack", ("pack",)),
    "protocol": Restored("only", ("protocol",)),
    "limit": Restored("limit", ("limit",)),
    "platform": Restored("", ("platform",)),
    "reset_cmd": Restored("", ("reset_cmd",)),
    "search_k": Restored("search_k", ("search_k",)),
    "context_budget": Restored("context_budget", ("context_budget",)),
}


def pool_label(index: int, email: str) -> str:
    """How a unit names a pool identity it was given: ``pool:NNN EMAIL``."""
    return f"pool:{index:03d} {email}"


def pool_index(label: str) -> int | None:
    """The pool index a ``pool_label`` names (None: not a pool label)."""
    m = _POOL_LABEL.match(label)
    return int(m.group(1)) if m else None


def redact_command(cmd: str, known: tuple[str, ...] = ()) -> str:
    """``cmd`` with secret-looking values replaced: env assignments, URL passwords, keys."""
    if not cmd:
        return ""
    for secret in known:
        if secret:
            cmd = cmd.replace(secret, REDACTED)
    cmd = _URL_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", cmd)
    found = command_secrets(cmd)
    if found is None:
        return REDACTED  # unbalanced quotes: nothing safe to keep
    # Replace the values where they stand, so the command keeps its shell syntax
    # (redirections, pipes, quoting) and a resume runs the command that was given.
    for secret in sorted(found - {"", REDACTED}, key=len, reverse=True):
        cmd = re.sub(rf"(?<![^\s=:'\"]){re.escape(secret)}(?![^\s'\";&|)])", REDACTED, cmd)
    return cmd


def command_secrets(cmd: str) -> set[str] | None:
    """The secret-looking values of a shell command (None: its quotes do not balance)."""
    try:
        words = shlex.split(cmd)
    except ValueError:
        return None
    found: set[str] = set()
    hide_next = False
    for word in words:
        name, eq, value = word.partition("=")
        if hide_next:
            found.add(word)
            hide_next = False
        elif eq and _SECRET_NAME.search(name.lstrip("-")):
            found.add(value)
        elif word.startswith("-") and not eq and _SECRET_NAME.search(word):
            hide_next = True
        elif _SECRET_VALUE.search(value if eq else word):
            found.add(value if eq else word)
    return found


class ResetRecord(NamedTuple):
    """How a run records ``--reset-cmd``: the program's name, a digest, the digest's salt."""

    program: str
    digest: str
    salt: str


def reset_record(cmd: str, known: tuple[str, ...] = ()) -> ResetRecord:
    """``cmd`` as a run records it: never the command itself, which may carry credentials
    no pattern recognises (a header, ``--user name:password``), only the program's name and
    a salted digest a resume checks the command given again against. The random salt (in
    the record) stops a table of precomputed digests; a command with little entropy can
    still be guessed from its digest by hashing candidates (docs/trust.md)."""
    if not cmd:
        return ResetRecord("", "", "")
    salt = secrets.token_hex(32)
    return ResetRecord(reset_program(cmd, known), reset_digest(cmd, salt), salt)


def reset_digest(cmd: str, salt: str) -> str:
    """blake3 of the command, keyed by the run's 32-byte salt (hex)."""
    return blake3.blake3(_RESET_DOMAIN + cmd.encode(), key=bytes.fromhex(salt)).hexdigest()


def reset_program(cmd: str, known: tuple[str, ...] = ()) -> str:
    """The name of the program ``cmd`` runs (its path's last part, after any ``VAR=value``
    assignments); "" when it cannot be told or looks secret itself."""
    try:
        words = shlex.split(cmd)
    except ValueError:
        return ""
    for word in words:
        if _ASSIGNMENT.match(word):
            continue
        name = os.path.basename(word)
        return name if redact_command(name, known) == name else ""
    return ""


def resume_reset_cmd(config: RunConfig, record: RunRecord, run_id: str) -> str:
    """The reset command a resume runs between passes: the one given again, which must
    match the recorded digest; RunRefused, naming the program, when it is missing or
    differs. A run recorded before digests gives its ``reset_cmd`` unless one is given."""
    given = config.reset_cmd if "reset_cmd" in config.given else ""
    if record.reset_digest:
        program = f"`{record.reset_program or 'the command'} ...`"
        if not given:
            raise RunRefused(
                f"run {run_id} resets its platform between passes with {program}, recorded "
                "only as a digest (it may carry secrets): give --reset-cmd again, the same command"
            )
        if not hmac.compare_digest(reset_digest(given, record.reset_salt), record.reset_digest):
            raise RunRefused(
                f"run {run_id}: this --reset-cmd is not the reset command the run recorded "
                f"({program}: its salted digest differs): give the same command"
            )
        return given
    cmd = given or record.reset_cmd
    if REDACTED in cmd:
        raise RunRefused("the recorded --reset-cmd had secrets redacted: give --reset-cmd again")
    return cmd


def diff(recorded: RunRecord, other: RunRecord) -> list[str]:
    """Every field where ``other`` differs from ``recorded``, as ``field: recorded != other``."""
    out = []
    for key in sorted(recorded.__struct_fields__):  # every field: defaults are omitted encoded
        a = msgspec.to_builtins(getattr(recorded, key))
        b = msgspec.to_builtins(getattr(other, key))
        if a != b:
            out.append(f"{key}: {_short(a)} != {_short(b)}")
    return out


# Record fields a queue worker (or a shard of a run sharded by an earlier version) sets
# for itself: the machine it runs on decides them. Paths differ between machines; what
# they hold is compared by hash (protocol set, pack).
MACHINE_LOCAL: Final = frozenset({"concurrency", "protocols_path", "pack"})


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def contradictions(config: RunConfig, record: RunRecord) -> list[str]:
    """Options given on resume that contradict the record, as ``--option: given (recorded X)``."""
    out = []
    for name, restored in RESTORED.items():
        rec_name = restored.record
        if not rec_name or name not in config.given:
            continue
        if (record.shards > 1 or config.local) and rec_name in MACHINE_LOCAL:
            continue
        given, recorded = getattr(config, name), getattr(record, rec_name)
        if given != recorded:
            given, recorded = _option_value(given), _option_value(recorded)
            out.append(f"--{name.replace('_', '-')} {given} (the run recorded {recorded})")
    recorded_platform = platform_option(record)
    if "platform" in config.given and recorded_platform not in (
        config.platform.rstrip("/"),
        redact_command(config.platform),  # a command recorded with its secrets redacted
    ):
        out.append(f"--platform {config.platform} (the run recorded {platform_option(record)})")
    if (
        "reset_cmd" in config.given
        and not record.reset_digest  # checked against the digest (resume_reset_cmd)
        and redact_command(config.reset_cmd) != record.reset_cmd
    ):
        out.append("--reset-cmd (differs from the recorded one)")
    if "agent_params" in config.given:
        for name, given in sorted(config.agent_params.items()):
            if record.agent_params.get(name) != given:
                recorded = record.agent_params.get(name, "nothing")
                out.append(f"--{name.replace('_', '-')} {given} (the run recorded {recorded})")
    return out


def _option_value(value: Any) -> Any:
    """A repeatable option's values as given on the command line (``a, b``; ``none``)."""
    return ", ".join(value) or "none" if isinstance(value, list) else value


def platform_option(record: RunRecord) -> str:
    """The ``--platform`` value that reaches the recorded platform again."""
    return PlatformSpec(record.platform.kind, record.platform.url).label


def read_record(ledger: Ledger, run_id: str) -> RunRecord:
    """The record in a run's ``run_started`` (RunRefused if the run predates run records)."""
    for event, _ in ledger.events(run_id, run_id):
        if isinstance(event, RunStartedEvent):
            if event.body.record is None:
                raise RunRefused(
                    f"run {run_id} was started by an older benchledger without a run record; "
                    "it cannot be resumed by this version"
                )
            return event.body.record
        break
    raise RunRefused(f"run {run_id} has no run_started event")


def highest_identity(ledger: Ledger, run_id: str) -> int:
    """The highest pool index any unit of the run was given (0 if none)."""
    top = 0
    for event, _ in ledger.events(run_id):
        if isinstance(event, UnitStartedEvent):
            for label in (event.body.teacher, event.body.learner):
                index = pool_index(label)
                if index is not None:
                    top = max(top, index)
    return top
