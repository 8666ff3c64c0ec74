"""When to try a Connect call again, and for how long: one deadline for the whole call.

The deadline starts before the first request is sent and bounds everything after it: each attempt's
timeout is capped by what is left, and a backoff is shortened so that the last attempt still starts
with at least `min_attempt_s` to run (the whole deadline is used; none of it is spent sleeping past the
end). The backoff is tenacity's (exponential, capped, plus random jitter so that many clients retrying
the same rebalance do not hit the worker in lockstep); *whether* an error may be retried at all is
mirrorbook's rule and lives in the client.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from tenacity import RetryCallState, stop_after_attempt, stop_after_delay, stop_never, wait_exponential, wait_random
from tenacity.stop import stop_base
from tenacity.wait import wait_base


@dataclass(frozen=True)
class RetryPolicy:
    """`deadline_s` bounds the whole call, retries included; the backoff starts at `initial_s` and is
    multiplied by `multiplier` up to `max_backoff_s`, plus a uniform jitter in [0, `jitter_s`].
    `max_attempts=1` means no retry at all (the deadline still caps the one attempt)."""

    deadline_s: float = 30.0
    initial_s: float = 0.25
    max_backoff_s: float = 4.0
    multiplier: float = 2.0
    jitter_s: float = 0.25
    max_attempts: int | None = None
    # A retry that could run for less than this before the deadline is not sent: its likely outcome is a
    # timeout that hides the error worth reporting.
    min_attempt_s: float = 0.1

    def __post_init__(self) -> None:
        if not self.deadline_s > self.min_attempt_s >= 0:
            raise ValueError(f"RetryPolicy: deadline_s ({self.deadline_s}) must be above min_attempt_s "
                             f"({self.min_attempt_s}), which must not be negative")
        if self.initial_s < 0 or self.max_backoff_s < 0 or self.jitter_s < 0 or self.multiplier < 1:
            raise ValueError("RetryPolicy: backoffs and jitter must not be negative, the multiplier not below 1")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError(f"RetryPolicy: max_attempts must be at least 1, not {self.max_attempts}")

    def wait(self) -> wait_base:
        """tenacity's wait: `initial_s * multiplier**(n-1)`, capped, plus jitter (n: attempts so far)."""
        return (wait_exponential(multiplier=self.initial_s, exp_base=self.multiplier, max=self.max_backoff_s)
                + wait_random(0, self.jitter_s))

    def schedule(self, clock: Callable[[], float] = time.monotonic) -> "Schedule":
        """A fresh clock for one call; start it right before the call's first request."""
        return Schedule(self, clock)


class Schedule:
    """The clock of one call: the timeout of each attempt and the sleep before the next, or the end.

    tenacity's strategies read a `RetryCallState`; this keeps one, fed by a single clock (injectable, so
    the deadline arithmetic is testable without sleeping).
    """

    def __init__(self, policy: RetryPolicy, clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self._clock = clock
        self._wait = policy.wait()
        self._last_start = policy.deadline_s - policy.min_attempt_s  # the latest an attempt may start
        self._deadline: stop_base = stop_after_delay(self._last_start)
        self._attempts: stop_base = stop_never if policy.max_attempts is None else stop_after_attempt(
            policy.max_attempts)
        # tenacity types retry_object as a Retrying, which only its own call loop needs; the strategies asked
        # here read the attempt number and the clock alone.
        self._state = RetryCallState(retry_object=None, fn=None, args=(), kwargs={})  # type: ignore[arg-type]
        self._state.start_time = clock()
        self.out_of_time = False  # True once the deadline (not max_attempts) ended the call

    def elapsed(self) -> float:
        return self._clock() - self._state.start_time

    def remaining(self) -> float:
        return max(0.0, self.policy.deadline_s - self.elapsed())

    def timeout(self, ceiling_s: float) -> float:
        """The next attempt's timeout: the client's own (`ceiling_s`), never more than what is left."""
        return min(ceiling_s, self.remaining())

    def failed(self, error: BaseException) -> float | None:
        """Record a failed attempt that may be repeated; return the sleep before the next, or None to stop."""
        state = self._state
        state.set_exception((type(error), error, error.__traceback__))
        state.outcome_timestamp = self._clock()  # one clock for the whole schedule
        if self._attempts(state):
            return None
        if self._deadline(state):
            self.out_of_time = True
            return None
        assert state.seconds_since_start is not None  # set with the outcome, just above
        sleep = min(self._wait(state), self._last_start - state.seconds_since_start)
        state.upcoming_sleep = sleep
        state.idle_for += sleep
        state.prepare_for_next_attempt()
        return sleep


NO_RETRY = RetryPolicy(max_attempts=1)
