"""The gate's bar options: ``--tolerance`` and ``--gate-metrics``.

``run --gate-baseline`` and ``prereg new`` take the same bar options (``gate_bar_args``)
as ``gate`` itself; a pre-registered bar is the one ``gate`` applies unless overridden.
Which bar applies and the verdict are ``projections.gate``'s (the library's
``benchledger.gate``).
"""

from __future__ import annotations

import argparse


def gate_bar_args(p: argparse._ActionsContainer) -> None:
    """Add ``--tolerance T`` and ``--gate-metrics M[,M]`` (a gate's bar)."""
    p.add_argument(
        "--tolerance",
        type=float,
        default=None,
        help="how much worse still counts as not worse (default 0.05: five points)",
    )
    p.add_argument(
        "--gate-metrics",
        metavar="M[,M]",
        help="the metrics that decide (default: every gated metric)",
    )


def metrics_option(value: str | None) -> list[str] | None:
    """``--gate-metrics a, b`` as ``["a", "b"]``; None when not given."""
    return [m.strip() for m in value.split(",") if m.strip()] if value else None
