"""Deadlines that hold against a SLOW Connect: the fault proxy (tests/faultproxy.py) sits in front of the
real Connect worker of the session devstack and holds its answers for seconds.

The bound asserted in each test is the feature (a call given a 5 s deadline ends by then), not a
speed measurement; each test also prints its duration (`pytest -s`) for the record.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from mirrorbook.connect import AsyncConnectClient, ConnectClient, ConnectSettings
from mirrorbook.connect.errors import ConnectDeadlineExceeded, ConnectError, ConnectTimeout
from mirrorbook.connect.retry import RetryPolicy
from mirrorbook.connect.wait import WaitTimeout, async_wait_for, wait_for
from tests.faultproxy import Fault, FaultProxy

pytestmark = pytest.mark.integration

SOURCE = "A->B.MirrorSourceConnector"
CLIENTS = ["sync", "async"]


def _call(kind: str, settings: ConnectSettings, retry: RetryPolicy, method: str, *args: Any) -> tuple[Any, float]:
    """One client method through the sync or the async client: its result or ConnectError, and seconds."""
    async def in_async() -> Any:
        async with AsyncConnectClient(settings, retry=retry) as c:
            return await getattr(c, method)(*args)

    t0 = time.monotonic()
    try:
        if kind == "sync":
            with ConnectClient(settings, retry=retry) as c:
                out = getattr(c, method)(*args)
        else:
            out = asyncio.run(in_async())
    except ConnectError as exc:
        out = exc
    elapsed = time.monotonic() - t0
    print(f"\n[duration] {method} via {kind}: {elapsed:.2f}s")
    return out, elapsed


@pytest.mark.parametrize("kind", CLIENTS)
@pytest.mark.parametrize("slow", ["409-after-3s", "answer-after-3s"])
def test_a_slow_connect_cannot_stretch_a_5s_deadline(connect_b_url, kind, slow):
    """Every answer is held 3 s. Before, each retry kept the full client timeout and the clock started at
    the first failure: a "5 s" call ran 8+ s. Now the second attempt gets only what is left."""
    if slow == "409-after-3s":  # Connect answers, slowly, that it is rebalancing
        fault, timeout_s = Fault.delay(3, status=409, count=10_000, path="/status$", message="rebalance"), 30.0
    else:  # Connect's real answer, held past the client's own 2 s timeout
        fault, timeout_s = Fault.delay(3, count=10_000, path="/status$"), 2.0
    with FaultProxy(connect_b_url, [fault]) as proxy:
        settings = ConnectSettings(url=proxy.url, name="B", timeout_s=timeout_s)
        err, elapsed = _call(kind, settings, RetryPolicy(deadline_s=5), "status", SOURCE)
    assert isinstance(err, ConnectDeadlineExceeded), err
    assert 4.5 <= elapsed <= 6.0  # the deadline was used, and held
    n = len(proxy.calls("GET", "/status$"))
    assert n == err.attempts >= 2
    assert isinstance(err.last, ConnectTimeout)
    text = str(err)
    assert text.startswith(f"Connect cluster B ({proxy.url}): GET status of connector {SOURCE} gave up after {n} "
                           f"attempts within 5s; last error: no answer within ")
    assert "(ReadTimeout)" in text and "\n  fix: " in text


@pytest.mark.parametrize("kind", CLIENTS)
def test_a_post_restart_is_never_repeated_after_a_timeout(connect_b_url, scratch_flow, kind):
    """The restart reaches Connect at once, its answer is held 3 s; the client times out after 1 s and,
    the request having possibly been applied, does not send it again — though 9 s of deadline are left."""
    name = scratch_flow.flow.connector("heartbeat")
    with FaultProxy(connect_b_url, [Fault.delay(3, method="POST", path="/restart$", count=10_000)]) as proxy:
        settings = ConnectSettings(url=proxy.url, name="B", timeout_s=1)
        err, elapsed = _call(kind, settings, RetryPolicy(deadline_s=10, initial_s=0.05), "restart", name)
        time.sleep(1.0)  # room for a (wrong) second request to show up in the proxy's log
    assert type(err) is ConnectTimeout, err
    assert elapsed < 2.0
    assert len(proxy.calls("POST", "/restart$")) == 1
    assert proxy.calls("POST", "/restart$")[0].status == 204  # Connect did restart it
    assert f"Connect cluster B ({proxy.url}): POST restart of connector {name}: no answer within 1s" in str(err)
    assert "may have applied it" in str(err)


@pytest.mark.parametrize("kind", CLIENTS)
def test_a_409_storm_then_success_succeeds_within_the_deadline(connect_b_url, kind):
    storm = Fault.delay(0.3, status=409, count=8, path="/status$", message="rebalance in progress")
    with FaultProxy(connect_b_url, [storm]) as proxy:
        policy = RetryPolicy(deadline_s=10, initial_s=0.05, max_backoff_s=0.4, jitter_s=0.05)
        status, elapsed = _call(kind, ConnectSettings(url=proxy.url, name="B"), policy, "status", SOURCE)
    assert not isinstance(status, Exception), status
    assert status.connector.state == "RUNNING"
    assert elapsed < 10
    calls = proxy.calls("GET", "/status$")
    assert [c.status for c in calls] == [409] * 8 + [200]
    # backed off between attempts (0.05, 0.1, 0.2, 0.4, 0.4 ... after each 0.3 s answer), not a tight loop
    gaps = [b.arrived - a.arrived for a, b in zip(calls, calls[1:])]
    assert all(gap >= 0.3 + min(0.05 * 2 ** k, 0.4) - 0.02 for k, gap in enumerate(gaps)), gaps


@pytest.mark.parametrize("kind", CLIENTS)
def test_a_wait_holds_its_timeout_against_a_slow_connect(connect_b_url, kind):
    """Each status poll gets what is left of the wait, not its own 30 s retry deadline."""
    with FaultProxy(connect_b_url, [Fault.delay(3, status=409, count=10_000, path="/status$")]) as proxy:
        settings = ConnectSettings(url=proxy.url, name="B")
        t0 = time.monotonic()
        with pytest.raises(WaitTimeout) as err:
            if kind == "sync":
                with ConnectClient(settings) as c:
                    wait_for(c, SOURCE, "STOPPED", timeout_s=2, poll_s=0.2)
            else:
                async def go() -> None:
                    async with AsyncConnectClient(settings) as c:
                        await async_wait_for(c, SOURCE, "STOPPED", timeout_s=2, poll_s=0.2)
                asyncio.run(go())
        elapsed = time.monotonic() - t0
    print(f"\n[duration] wait_for STOPPED (2 s) via {kind}: {elapsed:.2f}s")
    assert elapsed <= 3.0
    text = str(err.value)
    assert text.startswith(f"Connect cluster B ({proxy.url}): connector {SOURCE} did not reach STOPPED")
    assert "within 2s; last seen: no status (gave up after 1 attempt within 2s; last error: no answer within 2s" in text
