"""The retry schedule of one Connect call (deadline arithmetic, backoff, jitter), on a fake clock, and
the error mapping. The slow-Connect proofs against the real worker are in
tests/integration/test_connect_deadlines.py."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorbook.connect.errors import (ConnectBadRequest, ConnectConflict, ConnectorNotFound, ConnectorNotStopped,
                                       ConnectServerError, ConnectTimeout, Where, from_response)
from mirrorbook.connect.retry import NO_RETRY, RetryPolicy, Schedule

HERE = Where(url="http://connect:8083", method="GET", path="/x")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_error_mapping_from_status_and_body():
    msg = "Connectors must be in the STOPPED state before their offsets can be modified."
    assert isinstance(from_response(404, {"error_code": 404, "message": "No status found"}, HERE), ConnectorNotFound)
    assert isinstance(from_response(400, {"error_code": 400, "message": msg}, HERE), ConnectorNotStopped)
    assert isinstance(from_response(400, {"message": "bad"}, HERE), ConnectBadRequest)
    assert from_response(409, {"message": "rebalance"}, HERE).retryable
    assert isinstance(from_response(409, None, HERE), ConnectConflict)
    assert isinstance(from_response(500, {"message": "Request timed out"}, HERE), ConnectTimeout)
    assert isinstance(from_response(503, "down", HERE), ConnectServerError)
    assert not from_response(400, {"message": "bad"}, HERE).retryable


def test_a_huge_error_body_is_cut():
    err = from_response(502, "<html>" + "x" * 50_000, HERE)
    assert len(err.message) < 1_100 and err.message.endswith("(50006 chars)")


def _sleeps(policy: RetryPolicy, n: int) -> list[float]:
    """The first `n` sleeps of a schedule whose attempts take no time."""
    sched = policy.schedule(FakeClock())
    out = []
    for _ in range(n):
        sleep = sched.failed(RuntimeError("x"))
        assert sleep is not None
        out.append(sleep)
    return out


def test_backoff_multiplies_and_caps():
    assert _sleeps(RetryPolicy(deadline_s=100, initial_s=0.5, max_backoff_s=4, jitter_s=0), 6) == [
        0.5, 1.0, 2.0, 4.0, 4.0, 4.0]


policies = st.builds(
    RetryPolicy,
    deadline_s=st.floats(0.5, 30),
    initial_s=st.floats(0.05, 5),
    max_backoff_s=st.floats(0.05, 30),
    multiplier=st.floats(1, 4),
    jitter_s=st.floats(0, 2),
    min_attempt_s=st.floats(0.01, 0.4),
)


@given(policy=policies, n=st.integers(1, 30))
def test_each_sleep_is_the_capped_backoff_plus_a_bounded_jitter(policy, n):
    roomy = RetryPolicy(deadline_s=1e9, initial_s=policy.initial_s, max_backoff_s=policy.max_backoff_s,
                        multiplier=policy.multiplier, jitter_s=policy.jitter_s)
    sleeps = _sleeps(roomy, n)
    assert len(sleeps) == n  # a deadline this far off cuts none
    for k, sleep in enumerate(sleeps):
        base = min(policy.initial_s * policy.multiplier ** k, policy.max_backoff_s)
        assert base - 1e-9 <= sleep <= base + policy.jitter_s + 1e-9


def test_jitter_spreads_the_sleeps():
    policy = RetryPolicy(deadline_s=100, initial_s=1, max_backoff_s=1, jitter_s=0.5)
    firsts = {_sleeps(policy, 1)[0] for _ in range(50)}
    assert len(firsts) > 40 and all(1 <= s <= 1.5 for s in firsts)


@settings(max_examples=300)
@given(policy=policies, ceiling=st.floats(0.05, 60), used=st.lists(st.floats(0.1, 1), min_size=1, max_size=50))
def test_the_deadline_bounds_the_whole_call(policy, ceiling, used):
    """Attempts use a fraction (`used`) of their timeout, then fail; whatever they do, no attempt's
    timeout exceeds what is left, no sleep leads past the deadline, and the call ends within it."""
    clock = FakeClock()
    start = clock.now
    sched = policy.schedule(clock)
    for i in range(100_000):
        left = policy.deadline_s - (clock.now - start)
        timeout = sched.timeout(ceiling)
        assert 0 < timeout <= left and timeout <= ceiling
        assert abs(sched.remaining() - left) < 1e-9
        clock.now += timeout * used[i % len(used)]
        sleep = sched.failed(RuntimeError("attempt failed"))
        if sleep is None:
            break
        # the next attempt still has at least min_attempt_s before the deadline
        assert 0 <= sleep and (clock.now - start) + sleep <= policy.deadline_s - policy.min_attempt_s + 1e-9
        clock.now += sleep
    else:
        pytest.fail("the schedule never stopped")
    assert clock.now - start <= policy.deadline_s + 1e-9
    assert sched.out_of_time


def test_deadline_counts_from_the_first_request_not_the_first_failure():
    clock = FakeClock()
    sched = RetryPolicy(deadline_s=30, initial_s=1, jitter_s=0).schedule(clock)
    assert sched.timeout(30) == 30
    clock.now += 29.5  # the first attempt hung for most of the deadline
    sleep = sched.failed(ConnectTimeout("slow"))
    assert sleep == pytest.approx(0.4)  # the 1 s backoff, shortened: the last attempt gets min_attempt_s
    clock.now += sleep
    assert sched.timeout(30) == pytest.approx(0.1)
    clock.now += 0.1
    assert sched.failed(ConnectTimeout("slow")) is None
    assert sched.out_of_time and sched.remaining() == 0


def test_no_attempt_starts_in_the_last_min_attempt_s():
    clock = FakeClock()
    sched = RetryPolicy(deadline_s=30, initial_s=1, jitter_s=0).schedule(clock)
    clock.now += 29.95
    assert sched.failed(ConnectTimeout("slow")) is None and sched.out_of_time


def test_a_slow_first_attempt_caps_the_second():
    clock = FakeClock()
    sched = RetryPolicy(deadline_s=5, initial_s=0.25, jitter_s=0).schedule(clock)
    assert sched.timeout(30) == 5
    clock.now += 3  # a 409, three seconds late
    sleep = sched.failed(ConnectConflict("rebalance"))
    assert sleep == 0.25
    clock.now += sleep
    assert sched.timeout(30) == pytest.approx(1.75)


def test_max_attempts_stops_without_blaming_the_deadline():
    sched = NO_RETRY.schedule(FakeClock())
    assert sched.timeout(10) == 10
    assert sched.failed(ConnectTimeout("slow")) is None
    assert not sched.out_of_time
    sched = RetryPolicy(max_attempts=3, initial_s=0).schedule(FakeClock())
    assert [sched.failed(RuntimeError()) is not None for _ in range(3)] == [True, True, False]


@pytest.mark.parametrize("kw", [dict(deadline_s=0), dict(deadline_s=0.05), dict(min_attempt_s=-1), dict(initial_s=-1),
                                dict(jitter_s=-0.1), dict(multiplier=0.5), dict(max_attempts=0)])
def test_nonsense_policies_are_refused(kw):
    with pytest.raises(ValueError, match="RetryPolicy"):
        RetryPolicy(**kw)


def test_schedule_is_a_fresh_clock_per_call():
    clock = FakeClock()
    policy = RetryPolicy(deadline_s=10)
    first = policy.schedule(clock)
    clock.now += 8
    assert first.remaining() == pytest.approx(2)
    assert Schedule(policy, clock).remaining() == 10
