"""What a platform plugin builds on: the ``Platform`` it registers and the interfaces it fills.

A distribution adds a memory platform by naming a ``Platform`` (or a subclass of it) in
the ``benchledger.platforms`` entry-point group; docs/plugins.md shows a complete one.
Its provisioner hands out ``PlatformClient`` s (the core: identities, sessions, describe,
close); a client that also implements ``LifecycleCapability`` (capture, promote, update
checks) or ``RefCapability`` (resolving cited refs) gets those suites' checks, and one
that does not gets those stages reported not applicable, with the reason.
``benchledger.testing.platform.PlatformTestCase`` is the contract to test it against.
"""

from __future__ import annotations

from benchledger.harness.platforms.base import (
    CallResult,
    CaptureCheck,
    Description,
    LifecycleCapability,
    Observer,
    PlatformClient,
    PlatformSession,
    PollPolicy,
    Promotion,
    ReadBack,
    RefCapability,
    RefCheck,
    Target,
    UnitRecorder,
    UpdateCheck,
)
from benchledger.harness.platforms.platform import (
    PLATFORMS,
    Platform,
    PlatformOption,
    PlatformSpec,
    Provision,
    Provisioner,
)
from benchledger.harness.platforms.session import notify
from benchledger.harness.platforms.vocabulary import Vocabulary
from benchledger.ledger.events import HitRule

__all__ = [
    "PLATFORMS",
    "CallResult",
    "CaptureCheck",
    "Description",
    "HitRule",
    "LifecycleCapability",
    "Observer",
    "Platform",
    "PlatformClient",
    "PlatformOption",
    "PlatformSession",
    "PlatformSpec",
    "PollPolicy",
    "Promotion",
    "Provision",
    "Provisioner",
    "ReadBack",
    "RefCapability",
    "RefCheck",
    "Target",
    "UnitRecorder",
    "UpdateCheck",
    "Vocabulary",
    "notify",
]
