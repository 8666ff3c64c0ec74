"""MirrorMaker 2 on Connect: a flow's parts (its three connectors) moved to a state — pause, resume, stop,
restart — each a no-op when Connect already shows the target, and waited for.

The steps run in the caller's runbook (`rb`, passed in): each call is planned in a dry run and audited with
the state it asks for (`replication.expect.ConnectorState`).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, Sequence

from mirrorbook.connect.client import Call, ConnectClient, Endpoints
from mirrorbook.connect.errors import ConnectorNotFound
from mirrorbook.connect.models import ConnectorStatus
from mirrorbook.connect.wait import WaitTimeout, reached, wait_for
from mirrorbook.replication.connect_calls import mutate_connect
from mirrorbook.replication.backend import TARGET_ACTION, FlowTarget
from mirrorbook.replication.expect import ConnectorState
from mirrorbook.topology import FlowSpec

if TYPE_CHECKING:
    from mirrorbook.core.engine import Runbook, StepOutcome

# Stop replication first and bring it back last: the source connector leads on the way down.
ORDER_DOWN = ("source", "checkpoint", "heartbeat")
ORDER_UP = ("heartbeat", "checkpoint", "source")
RESTART_SETTLE_S = 10.0


def connector_state(status: ConnectorStatus) -> dict[str, Any]:
    """A connector's state as steps record it (runbooks/standing.py reads it back)."""
    return {"connector": status.connector.state, "tasks": [t.state for t in status.tasks]}


def _failed(status: ConnectorStatus) -> bool:
    return status.connector.state == "FAILED" or any(t.state == "FAILED" for t in status.tasks)


def decide(status: ConnectorStatus, target: str) -> Call[Any] | None:
    """The call that moves a connector toward `target`, or None when only waiting is needed."""
    name = status.name
    if reached(status, target):
        return None
    if target == "RUNNING":
        if _failed(status):
            return Endpoints.restart(name, include_tasks=True, only_failed=True)
        return None if status.connector.state == "RUNNING" else Endpoints.resume(name)
    if status.connector.state == target:
        return None  # e.g. STOPPED already, tasks still shutting down: just wait
    return Endpoints.pause(name) if target == "PAUSED" else Endpoints.stop(name)


def wait_caused(client: ConnectClient, name: str, target: str, timeout_s: float, *, restarted: bool = False
                ) -> ConnectorStatus:
    """Wait for the state a call caused. Right after a restart was accepted Connect can still show the
    old FAILED, so FAILED only counts as "failed again" after RESTART_SETTLE_S."""
    if not restarted:
        return wait_for(client, name, target, timeout_s=timeout_s)
    try:
        return wait_for(client, name, target, timeout_s=min(RESTART_SETTLE_S, timeout_s), fail_fast=False)
    except WaitTimeout:
        return wait_for(client, name, target, timeout_s=max(timeout_s - RESTART_SETTLE_S, 1.0))


def set_connector_state(rb: "Runbook", client: ConnectClient, flow: FlowSpec, role: str, target: FlowTarget, *,
                        wait: bool = True, timeout_s: float = 120.0, sent: Callable[[], None] | None = None
                        ) -> "StepOutcome":
    """`sent`: called once this part's call was made (or found not needed, or failed), before its step closes."""
    name = flow.connector(role)
    verb = TARGET_ACTION[target]
    with rb.step(f"connector.{verb}", flow.name) as step:
        try:
            status = client.status(name)
            step.observe(connector_state(status))
            step.note(connector=name, role=role, target=target)
            call = decide(status, target)
            if call is not None:
                mutate_connect(step, client, call, action=f"connector.{verb}",
                               expect=ConnectorState(connector=name, state=target),
                               precondition=f"{name} is {status.summary()}; wanted {target}")
            elif reached(status, target):
                step.note(reason=f"already {target}")
        finally:
            if sent is not None:
                sent()
        if wait and not rb.dry_run:
            status = wait_caused(client, name, target, timeout_s, restarted=call is not None and call.method == "POST")
        step.settle(connector_state(status))
    return step.outcome


def roles_for(selection: str | Sequence[str], target: str) -> list[str]:
    """`all`, one role, or the roles named, in the order that keeps replication consistent for the target state."""
    order = ORDER_UP if target == "RUNNING" else ORDER_DOWN
    if isinstance(selection, str):
        return list(order) if selection == "all" else [selection]
    return [r for r in order if r in selection]


def set_flow_state(rb: "Runbook", client: ConnectClient, flow: FlowSpec, selection: str | Sequence[str],
                   target: FlowTarget, *, wait: bool = True, timeout_s: float = 120.0) -> list["StepOutcome"]:
    """Each selected part toward `target`, one after the other in `roles_for`'s order (a call that fails leaves the
    parts after it as they were) — except stops not waited for, which are requested side by side (`_stop_at_once`).
    """
    roles = roles_for(selection, target)
    if target == "STOPPED" and not wait and not rb.dry_run and len(roles) > 1:
        return _stop_at_once(rb, client, flow, roles, timeout_s)
    return [set_connector_state(rb, client, flow, role, target, wait=wait, timeout_s=timeout_s) for role in roles]


def _stop_at_once(rb: "Runbook", client: ConnectClient, flow: FlowSpec, roles: list[str], timeout_s: float
                  ) -> list["StepOutcome"]:
    """The parts' stops requested side by side, each part its own step: a stop is what a cutover waits for, and
    Connect's herder answers each one after writing the connector's (empty) task configs and rebalancing — three
    in a row took 3.3-4.1 s on the 1,000-group scale stack, side by side 0.6-0.9 s (3.1 s once in three, behind a
    rebalance). A part whose stop fails does not hold the
    others back: they are stopped, and its step's error (raised once every part has answered) says so; no step
    closes before every call is on record, so what a failed task's error lists as changed is all it changed."""
    every_call_made = threading.Barrier(len(roles))

    def sent() -> None:
        try:
            every_call_made.wait(timeout_s)
        except threading.BrokenBarrierError:  # a part that never answered: the others go on, with what they know
            pass

    with ThreadPoolExecutor(max_workers=len(roles), thread_name_prefix="stop") as pool:
        parts = [pool.submit(set_connector_state, rb, client, flow, role, "STOPPED", wait=False, timeout_s=timeout_s,
                             sent=sent) for role in roles]
    outcomes: list[StepOutcome] = []
    failed: list[BaseException] = []
    for part in parts:
        try:
            outcomes.append(part.result())
        except Exception as exc:  # every part's outcome is on record; the first failure (in `roles` order) is raised
            failed.append(exc)
    if failed:
        raise failed[0]
    return outcomes


def parts_status(client: ConnectClient, flow: FlowSpec, deadline_s: float) -> dict[str, ConnectorStatus | None]:
    """Each of the flow's connectors as Connect shows it, all read within one deadline (None: Connect has no
    such connector). Raises the ConnectError of the first read that fails."""
    end = time.monotonic() + deadline_s
    out: dict[str, ConnectorStatus | None] = {}
    for role, name in flow.connector_names.items():
        try:
            # Every read gets what is left, and never less than one short attempt.
            out[role] = client.run(Endpoints.status(name), deadline_s=max(0.5, end - time.monotonic()))
        except ConnectorNotFound:
            out[role] = None
    return out
