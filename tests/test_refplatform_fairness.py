"""refplatform's SQL workers are shared fairly between identities (issue 39, item 7).

Two workers serve every identity of a process. One identity's long queries once held both,
and another identity's ``SELECT 1`` spent its whole deadline waiting and failed with
``context deadline exceeded``. Now one identity holds at most one of the two, a query's
deadline starts when a worker takes it, and a wait past its own bound answers "busy"
(docs/refplatform.md, "Bounds"). Real server over loopback, pool keys as identities; the
threads are ordered by the pool's own reported load, never by sleeping.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from benchledger.benchmarks.bounds import Mcp, sql_answer
from benchledger.refplatform.auth import pool_name
from benchledger.refplatform.errors import ToolError
from benchledger.refplatform.packs import default_pack
from benchledger.refplatform.platform import Platform
from benchledger.refplatform.server import RunningPlatform
from benchledger.refplatform.toolkits.sql import MAX_TIMEOUT_S, SqlEngine

CAP = 3.0  # this platform's timeout_seconds cap, and the long queries' timeout
DEADLINE = 1.0  # the default deadline, the one a SELECT 1 runs under
# A 2e12-row cross join, interrupted at its deadline (it never ends before it).
LONG = (
    "SELECT count(*) AS n FROM memory.bench.orders a, memory.bench.orders b, "
    "memory.bench.orders c, memory.bench.orders d"
)
BOUND = 60.0  # seconds; only an upper bound on a wait, never a way to order threads
Load = dict[str | None, int]


@pytest.fixture(scope="module")
def platform() -> Iterator[RunningPlatform]:
    engine = SqlEngine(default_pack(), timeout_s=DEADLINE, max_timeout_s=CAP, queue_wait_s=BOUND)
    with RunningPlatform(Platform(sql=engine), pool_size=4) as running:
        pool = engine._workers
        assert pool.ready() == ""
        pool._prestart()  # the second worker too: the timings below are of queries, not starts
        yield running


def _session(platform: RunningPlatform, index: int) -> Mcp:
    mcp = Mcp("127.0.0.1", platform.port, key=platform.key(index), timeout=BOUND)
    assert mcp.open() == 200
    mcp.ready_for_sql()
    return mcp


def _in_background(
    platform: RunningPlatform, index: int, sql: str, **extra: object
) -> Callable[[], tuple[bool, str]]:
    """Send ``sql`` as pool identity ``index`` in a thread; a function joining it for the answer."""
    mcp = _session(platform, index)
    answer: list[tuple[bool, str]] = []
    thread = threading.Thread(target=lambda: answer.append(sql_answer(mcp, sql, **extra)))
    thread.start()

    def join() -> tuple[bool, str]:
        thread.join(BOUND)
        mcp.close()
        assert answer, "no answer within the bound"
        return answer[0]

    return join


def _wait_for(platform: RunningPlatform, ready: Callable[[Load, Load], bool]) -> None:
    assert platform.platform.sql._workers.wait_for(ready, BOUND), "the pool never got there"


def _timed_select_1(platform: RunningPlatform, index: int) -> tuple[bool, str, float]:
    mcp = _session(platform, index)
    started = time.monotonic()
    is_error, text = sql_answer(mcp, "SELECT 1 AS x")
    elapsed = time.monotonic() - started
    mcp.close()
    return is_error, text, elapsed


def test_an_identitys_select_1_is_answered_while_another_runs_two_deadline_long_queries(platform):
    hog = pool_name(1)
    long_ones = [_in_background(platform, 1, LONG, timeout_seconds=int(CAP)) for _ in range(2)]
    # Both of its queries are with the pool: one on a worker, one waiting for its share.
    _wait_for(platform, lambda holding, waiting: holding.get(hog, 0) + waiting.get(hog, 0) == 2)

    is_error, text, elapsed = _timed_select_1(platform, 2)

    assert not is_error, text
    assert '"x": 1' in text
    assert elapsed < DEADLINE, f"SELECT 1 took {elapsed:.2f} s"
    answers = [join() for join in long_ones]
    # The waiting one ran its own full deadline once a worker took it: a timeout, not "busy".
    for is_error, text in answers:
        assert is_error and "context deadline exceeded" in text, text


def test_a_query_waiting_for_a_worker_does_not_spend_its_deadline_waiting(platform):
    long_ones = [_in_background(platform, i, LONG, timeout_seconds=int(CAP)) for i in (1, 2)]
    # Two identities hold both workers, each for CAP seconds, three times the deadline below.
    _wait_for(platform, lambda holding, _: holding == {pool_name(1): 1, pool_name(2): 1})

    is_error, text, elapsed = _timed_select_1(platform, 3)

    assert not is_error, text
    assert '"x": 1' in text
    assert elapsed > DEADLINE  # it did wait, longer than its own deadline
    for join in long_ones:
        join()


def test_a_query_that_finds_no_worker_within_the_wait_bound_is_busy_not_timed_out(platform):
    engine = SqlEngine(default_pack(), timeout_s=DEADLINE, max_timeout_s=CAP, queue_wait_s=0.2)
    long_ones = [_in_background(platform, i, LONG, timeout_seconds=int(CAP)) for i in (1, 2)]
    _wait_for(platform, lambda holding, _: holding == {pool_name(1): 1, pool_name(2): 1})
    try:
        with pytest.raises(ToolError) as caught:
            engine.query("SELECT 1 AS x", owner=pool_name(3))  # the same process's workers
    finally:
        engine.close()
        for join in long_ones:
            join()
    assert caught.value.code == "sql_busy"
    assert "every SQL worker is busy" in caught.value.message
    assert "deadline" not in caught.value.message


@pytest.mark.parametrize(
    ("seconds", "refused"),
    [(1, False), (int(CAP), False), (int(CAP) + 1, True), (300, True)],
    ids=["below-the-cap", "at-the-cap", "just-over-the-cap", "mcp-trinos-own-maximum"],
)
def test_timeout_seconds_over_the_cap_is_refused_naming_the_cap(platform, seconds, refused):
    mcp = _session(platform, 4)
    is_error, text = sql_answer(mcp, "SELECT 1 AS x", timeout_seconds=seconds)
    mcp.close()
    assert is_error == refused, text
    if refused:
        assert f"exceeds this platform's maximum of {CAP:g} seconds" in text


def test_the_default_cap_is_the_documented_one():
    with open("docs/refplatform.md", encoding="utf-8") as fh:
        assert f"at most {MAX_TIMEOUT_S:g} s" in fh.read()
