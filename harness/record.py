"""The run record: what a run was started with, built from the request, read back whole.

``RunConfig`` is what the user asked for (secrets included, never stored);
``RunRecord`` (ledger/events.py) is what the ledger keeps. Resume restores a run from
its record and refuses, naming the field, any option that contradicts it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from harness.errors import HarnessError
from harness.settings import Settings
from ledger import Ledger
from ledger.events import RunRecord, RunStarted, UnitStarted

REDACTED: Final = "<redacted>"
_SECRET_NAME = re.compile(r"(?i)(key|token|secret|passw|pwd|auth|credential)")
_SECRET_VALUE = re.compile(r"(?i)^(sk-|ghp_|xox[bp]-|eyJ)|^[A-Za-z0-9_\-]{32,}$")
_URL_PASSWORD = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@\s]+):[^@/\s]+@")
_IDENTITY = re.compile(r"^pool:(\d+)\b")


class RunRefused(HarnessError):
    """The run cannot start or resume as asked (pool too small, contradicts its record, ...)."""


@dataclass
class RunConfig:
    """What the user asked for. ``given`` names the options set explicitly (for resume)."""

    protocols_path: str = ""
    agent: str = "scripted"
    platform: str = "embedded"
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


# RunConfig field -> RunRecord field, for options a resume may repeat but not change.
RESTORED: Final = {
    "protocols_path": "protocols_path",
    "agent": "agent",
    "k": "k",
    "pool_size": "pool_size",
    "concurrency": "concurrency",
    "capture_timeout_s": "capture_timeout_s",
    "suite": "suite",
    "runtime_scope": "runtime_scope",
    "pack": "pack",
}


def redact_command(cmd: str, known: tuple[str, ...] = ()) -> str:
    """``cmd`` with secret-looking values replaced: env assignments, URL passwords, keys."""
    if not cmd:
        return ""
    for secret in known:
        if secret:
            cmd = cmd.replace(secret, REDACTED)
    cmd = _URL_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", cmd)
    try:
        words = shlex.split(cmd)
    except ValueError:
        return REDACTED  # unbalanced quotes: nothing safe to keep
    out: list[str] = []
    hide_next = False
    for word in words:
        name, eq, value = word.partition("=")
        if hide_next:
            out.append(REDACTED)
            hide_next = False
        elif eq and _SECRET_NAME.search(name.lstrip("-")):
            out.append(f"{name}={REDACTED}")
        elif word.startswith("-") and not eq and _SECRET_NAME.search(word):
            out.append(word)
            hide_next = True
        elif _SECRET_VALUE.search(value if eq else word):
            out.append(f"{name}={REDACTED}" if eq else REDACTED)
        else:
            out.append(word)
    return shlex.join(out)


def diff(recorded: RunRecord, other: RunRecord) -> list[str]:
    """Every field where ``other`` differs from ``recorded``, as ``field: recorded != other``."""
    a, b = msgspec.to_builtins(recorded), msgspec.to_builtins(other)
    out = []
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            out.append(f"{key}: {_short(a.get(key))} != {_short(b.get(key))}")
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def contradictions(config: RunConfig, record: RunRecord) -> list[str]:
    """Options given on resume that contradict the record, as ``--option: given (recorded X)``."""
    out = []
    for name, rec_name in RESTORED.items():
        if name not in config.given:
            continue
        given, recorded = getattr(config, name), getattr(record, rec_name)
        if given != recorded:
            out.append(f"--{name.replace('_', '-')} {given} (the run recorded {recorded})")
    if "platform" in config.given and config.platform.rstrip("/") != _platform_label(record):
        out.append(f"--platform {config.platform} (the run recorded {_platform_label(record)})")
    if "reset_cmd" in config.given and redact_command(config.reset_cmd) != record.reset_cmd:
        out.append("--reset-cmd (differs from the recorded one)")
    if "agent_params" in config.given:
        for name, given in sorted(config.agent_params.items()):
            if record.agent_params.get(name) != given:
                recorded = record.agent_params.get(name, "nothing")
                out.append(f"--{name.replace('_', '-')} {given} (the run recorded {recorded})")
    return out


def _platform_label(record: RunRecord) -> str:
    p = record.platform
    return p.url or ("embedded:process" if p.kind == "process" else "embedded")


def platform_option(record: RunRecord) -> str:
    """The ``--platform`` value that reaches the recorded platform again."""
    return _platform_label(record)


def read_record(ledger: Ledger, run_id: str) -> RunRecord:
    """The record in a run's ``run_started`` (RunRefused if the run predates run records)."""
    for event, _ in ledger.events(run_id, run_id):
        if isinstance(event, RunStarted):
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
        if isinstance(event, UnitStarted):
            for label in (event.body.teacher, event.body.learner):
                m = _IDENTITY.match(label)
                if m:
                    top = max(top, int(m.group(1)))
    return top
