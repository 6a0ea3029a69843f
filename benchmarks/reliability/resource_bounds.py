"""Resource bounds: benchmarks/bounds.py's attacks on a ``platform serve`` child."""

from __future__ import annotations

from benchledger.benchmarks.reliability.scenario import Config, Row


def resource_bounds(cfg: Config) -> Row:
    """The attacks of benchmarks/bounds.py on a ``platform serve`` child: each bound holds."""
    from benchledger.benchmarks import bounds

    sessions = bounds.MAX_SESSIONS + 20
    served = bounds.Served(environ=cfg.environ)
    try:
        outcomes = bounds.attacks(served, sessions=sessions)
    finally:
        served.stop()
    server_kb = max(o.server_kb for o in outcomes)
    worker_kb = max(o.workers_kb for o in outcomes)
    problems = [f"{o.attack}: {o.answer}" for o in outcomes if not o.ok]
    for who, kb in (("the server", server_kb), ("a SQL worker", worker_kb)):
        if kb >= bounds.CEILING_KB:
            problems.append(f"{who} reached {kb // 1024} MB (ceiling {bounds.CEILING_KB >> 10} MB)")
    slowest = max(o.seconds for o in outcomes if o.attack != "sessions")
    return Row(
        "resource bounds",
        "a 600 MB REST body (declared, chunked); SQL of 20k and 200k spaces and 20k open "
        "parentheses; 2 spinning and 3 ballooning queries; "
        f"{sessions} MCP sessions left open (platform serve)",
        f"{sum(o.ok for o in outcomes)}/{len(outcomes)} held: each refused at its bound (413, "
        "read-only, length, depth, deadline, memory, result size; 503 past "
        f"{bounds.MAX_SESSIONS} sessions) within {slowest:.1f} s, a plain query answered "
        f"after them; peak RSS {server_kb >> 10} MB server, {worker_kb >> 10} MB SQL worker",
        not problems,
        problems=problems,
    )
