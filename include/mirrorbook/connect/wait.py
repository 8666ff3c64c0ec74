"""Polling until a connector (and its tasks) reaches a state, with a deadline and a precise message."""

from __future__ import annotations

import asyncio
import time

from mirrorbook.connect.client import AsyncConnectClient, ConnectClient, Endpoints
from mirrorbook.connect.errors import ConnectError, ConnectorNotFound, seconds
from mirrorbook.connect.models import ConnectorStatus
from mirrorbook.errors import MirrorbookError

TARGETS = ("RUNNING", "PAUSED", "STOPPED")
# A poll is given what is left of the wait, but never less than this: the last poll may overrun the
# wait by this much rather than be sent with no time to answer.
MIN_POLL_S = 1.0


class WaitTimeout(MirrorbookError):
    pass


class ConnectorFailed(MirrorbookError):
    pass


def reached(status: ConnectorStatus, target: str, min_tasks: int = 0) -> bool:
    """STOPPED means the connector says STOPPED *and* `tasks == []` (stop is asynchronous)."""
    if status.connector.state != target:
        return False
    if target == "STOPPED":
        return status.tasks == []
    return len(status.tasks) >= min_tasks and all(t.state == target for t in status.tasks)


def _failure(place: str, status: ConnectorStatus, target: str) -> ConnectorFailed | None:
    if target == "RUNNING":
        failed = [t for t in status.tasks if t.state == "FAILED"]
        if status.connector.state == "FAILED" or failed:
            trace = (status.connector.trace or (failed[0].trace if failed else "") or "").strip().splitlines()
            return ConnectorFailed(f"{place}: connector {status.name} is FAILED ({status.summary()})"
                                   + (f": {trace[0]}" if trace else ""),
                                   f"inspect GET /connectors/{status.name}/status; restart with "
                                   f"POST /connectors/{status.name}/restart?includeTasks=true&onlyFailed=true")
    return None


def _timeout(place: str, name: str, target: str, timeout_s: float, last: ConnectorStatus | None,
             err: ConnectError | None) -> WaitTimeout:
    seen = last.summary() if last else f"no status ({err.detail()})" if err else "no status"
    extra = " (STOPPED also requires tasks == [])" if target == "STOPPED" else ""
    return WaitTimeout(f"{place}: connector {name} did not reach {target}{extra} within {seconds(timeout_s)}; "
                       f"last seen: {seen}")


class _Waiter:
    """The state of one wait: judges each poll, and knows when the deadline has passed."""

    def __init__(self, client: ConnectClient | AsyncConnectClient, name: str, target: str, timeout_s: float,
                 min_tasks: int, fail_fast: bool, missing_ok: bool) -> None:
        if target not in TARGETS:
            raise ValueError(f"target must be one of {TARGETS}, not {target!r}")
        self.place, self.call = client.place, Endpoints.status(name)
        self.name, self.target, self.timeout_s = name, target, timeout_s
        self.min_tasks, self.fail_fast, self.missing_ok = min_tasks, fail_fast, missing_ok
        self.deadline = time.monotonic() + timeout_s
        self.poll_cap_s = client.retry.deadline_s
        self.last: ConnectorStatus | None = None
        self.err: ConnectError | None = None

    def poll_deadline(self) -> float:
        """One status call's deadline: what is left of the wait (so that retries inside it cannot
        outlast the wait), at least MIN_POLL_S, at most the client's own."""
        return min(self.poll_cap_s, max(MIN_POLL_S, self.deadline - time.monotonic()))

    def judge(self, status: ConnectorStatus | None, err: ConnectError | None) -> ConnectorStatus | None:
        """Return the status when reached; raise on failure or timeout; None means poll again."""
        if isinstance(err, ConnectorNotFound) and not self.missing_ok:
            raise err
        if status is not None:
            self.last, self.err = status, None
            if reached(status, self.target, self.min_tasks):
                return status
            failure = _failure(self.place, status, self.target) if self.fail_fast else None
            if failure:
                raise failure
        else:
            self.err = err
        if time.monotonic() >= self.deadline:
            raise _timeout(self.place, self.name, self.target, self.timeout_s, self.last, self.err)
        return None


def wait_for(client: ConnectClient, name: str, target: str, *, timeout_s: float = 60.0, poll_s: float = 0.5,
             min_tasks: int = 0, fail_fast: bool = True, missing_ok: bool = False) -> ConnectorStatus:
    """`missing_ok` tolerates a 404 while waiting (a connector just created has no status yet)."""
    waiter = _Waiter(client, name, target, timeout_s, min_tasks, fail_fast, missing_ok)
    while True:
        try:
            done = waiter.judge(client.run(waiter.call, deadline_s=waiter.poll_deadline()), None)
        except ConnectError as exc:
            done = waiter.judge(None, exc)
        if done:
            return done
        time.sleep(poll_s)


async def async_wait_for(client: AsyncConnectClient, name: str, target: str, *, timeout_s: float = 60.0,
                         poll_s: float = 0.5, min_tasks: int = 0, fail_fast: bool = True,
                         missing_ok: bool = False) -> ConnectorStatus:
    """`missing_ok` tolerates a 404 while waiting (a connector just created has no status yet)."""
    waiter = _Waiter(client, name, target, timeout_s, min_tasks, fail_fast, missing_ok)
    while True:
        try:
            status = await client.run(waiter.call, deadline_s=waiter.poll_deadline())
            done = waiter.judge(status, None)
        except ConnectError as exc:
            done = waiter.judge(None, exc)
        if done:
            return done
        await asyncio.sleep(poll_s)
