"""The flows API's changes, made by the runbook engine like any runbook's: read state -> act only where
needed -> wait -> audit. Every mutating Connect call is an audit event with the API caller as `user`,
offsets are snapshotted before they are overwritten, and the flow is locked for the duration, so an
API call and a runbook (or two API calls) never change one flow at the same time.

These functions block (Connect calls, waits): the routes run them in a worker thread.
"""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Iterator, Literal

from mirrorbook.airflow.api.errors import Locked, NotStopped, not_stopped_message
from mirrorbook.airflow.api.models import Caller
from mirrorbook.audit import AuditStore
from mirrorbook.clients import Clients
from mirrorbook.connect.models import ConnectorOffsets
from mirrorbook.replication import backend_for
from mirrorbook.runbooks import lock
from mirrorbook.runbooks.connectors import ACTION_TARGET
from mirrorbook.core.engine import RunInfo, Runbook, StepOutcome
from mirrorbook.errors import GateRefused
from mirrorbook.topology import FlowSpec

TASK_PREFIX = "flows-api"
WAIT_TIMEOUT_S = 60.0
StateAction = Literal["pause", "resume"]
OffsetsAction = Literal["alter", "reset"]


def new_runbook(action: str, flow: FlowSpec, caller: Caller, audit: AuditStore) -> Runbook:
    """A runbook for one API call: its own run id (what `mirrorbook audit list --run-id` finds)."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    run_id = f"{TASK_PREFIX}__{action}__{flow.source}-{flow.target}__{stamp}_{uuid.uuid4().hex[:6]}"
    return Runbook(RunInfo(run_id=run_id, task_id=f"{TASK_PREFIX}.{action}", user=caller.name), audit)


@contextmanager
def locked(rb: Runbook, flow: FlowSpec, clients: Clients) -> Iterator[None]:
    try:
        lock.acquire(rb, [flow], clients)
    except GateRefused as exc:
        raise Locked(exc.message, exc.hint) from exc
    try:
        yield
    finally:
        lock.release(rb, [flow])


def set_state(clients: Clients, flow: FlowSpec, action: StateAction, caller: Caller,
              audit: AuditStore) -> tuple[Runbook, list[StepOutcome]]:
    """Pause or resume all three connectors of the flow; connectors already there are left alone."""
    rb = new_runbook(action, flow, caller, audit)
    with locked(rb, flow, clients):
        outcomes = backend_for(clients, flow).set_state(rb, ACTION_TARGET[action], timeout_s=WAIT_TIMEOUT_S)
    return rb, outcomes


def change_source_offsets(clients: Clients, flow: FlowSpec, action: OffsetsAction, caller: Caller,
                          audit: AuditStore, requested: ConnectorOffsets | None = None) -> tuple[Runbook, StepOutcome]:
    """Alter or reset the offsets of the flow's MirrorSourceConnector, which must already be STOPPED.

    A connector that is not STOPPED is refused with Connect's own 400 message before any request that
    changes something (Connect would refuse the PATCH/DELETE the same way; we do not send it).
    """
    name = flow.connector("source")
    backend = backend_for(clients, flow)
    if backend.status(with_lag=False).connectors["source"].state != "STOPPED":
        raise NotStopped(not_stopped_message(name))
    rb = new_runbook(f"offsets.{action}", flow, caller, audit)
    with locked(rb, flow, clients):
        try:
            outcome = backend.change_own_offsets(rb, "source", action, requested=requested, timeout_s=WAIT_TIMEOUT_S)
        except GateRefused as exc:  # resumed by someone between our check and the engine's
            raise NotStopped(not_stopped_message(name)) from exc
    return rb, outcome
