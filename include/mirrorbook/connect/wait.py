"""Polling until a connector (and its tasks) reaches a state, with a deadline and a precise message."""

from __future__ import annotations

import asyncio
import time

from mirrorbook.connect.client import AsyncConnectClient, ConnectClient
from mirrorbook.connect.errors import ConnectError, ConnectorNotFound
from mirrorbook.connect.models import ConnectorStatus
from mirrorbook.errors import MirrorbookError

TARGETS = ("RUNNING", "PAUSED", "STOPPED")


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


def _failure(status: ConnectorStatus, target: str) -> ConnectorFailed | None:
    if target == "RUNNING":
        failed = [t for t in status.tasks if t.state == "FAILED"]
        if status.connector.state == "FAILED" or failed:
            trace = (status.connector.trace or (failed[0].trace if failed else "") or "").strip().splitlines()
            return ConnectorFailed(f"Connector {status.name} is FAILED ({status.summary()})"
                                   + (f": {trace[0]}" if trace else ""),
                                   f"inspect GET /connectors/{status.name}/status; restart with "
                                   f"POST /connectors/{status.name}/restart?includeTasks=true&onlyFailed=true")
    return None


def _timeout(name: str, target: str, timeout_s: float, last: ConnectorStatus | None, err: Exception | None) -> WaitTimeout:
    seen = last.summary() if last else f"no status ({err})" if err else "no status"
    extra = " (STOPPED also requires tasks == [])" if target == "STOPPED" else ""
    return WaitTimeout(f"Connector {name} did not reach {target}{extra} within {timeout_s:.0f}s; last seen: {seen}")


class _Waiter:
    """The state of one wait: judges each poll, and knows when the deadline has passed."""

    def __init__(self, name: str, target: str, timeout_s: float, min_tasks: int, fail_fast: bool,
                 missing_ok: bool) -> None:
        if target not in TARGETS:
            raise ValueError(f"target must be one of {TARGETS}, not {target!r}")
        self.name, self.target, self.timeout_s = name, target, timeout_s
        self.min_tasks, self.fail_fast, self.missing_ok = min_tasks, fail_fast, missing_ok
        self.deadline = time.monotonic() + timeout_s
        self.last: ConnectorStatus | None = None
        self.err: Exception | None = None

    def judge(self, status: ConnectorStatus | None, err: ConnectError | None) -> ConnectorStatus | None:
        """Return the status when reached; raise on failure or timeout; None means poll again."""
        if isinstance(err, ConnectorNotFound) and not self.missing_ok:
            raise err
        if status is not None:
            self.last, self.err = status, None
            if reached(status, self.target, self.min_tasks):
                return status
            failure = _failure(status, self.target) if self.fail_fast else None
            if failure:
                raise failure
        else:
            self.err = err
        if time.monotonic() >= self.deadline:
            raise _timeout(self.name, self.target, self.timeout_s, self.last, self.err)
        return None


def wait_for(client: ConnectClient, name: str, target: str, *, timeout_s: float = 60.0, poll_s: float = 0.5,
             min_tasks: int = 0, fail_fast: bool = True, missing_ok: bool = False) -> ConnectorStatus:
    """`missing_ok` tolerates a 404 while waiting (a connector just created has no status yet)."""
    waiter = _Waiter(name, target, timeout_s, min_tasks, fail_fast, missing_ok)
    while True:
        try:
            done = waiter.judge(client.status(name), None)
        except ConnectError as exc:
            done = waiter.judge(None, exc)
        if done:
            return done
        time.sleep(poll_s)


async def async_wait_for(client: AsyncConnectClient, name: str, target: str, *, timeout_s: float = 60.0,
                         poll_s: float = 0.5, min_tasks: int = 0, fail_fast: bool = True, missing_ok: bool = False) -> ConnectorStatus:
    """`missing_ok` tolerates a 404 while waiting (a connector just created has no status yet)."""
    waiter = _Waiter(name, target, timeout_s, min_tasks, fail_fast, missing_ok)
    while True:
        try:
            done = waiter.judge(await client.status(name), None)
        except ConnectError as exc:
            done = waiter.judge(None, exc)
        if done:
            return done
        await asyncio.sleep(poll_s)
