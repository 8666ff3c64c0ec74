"""MirrorMaker 2 on Connect: a flow's parts (its three connectors) moved to a state — pause, resume, stop,
restart — each a no-op when Connect already shows the target, and waited for.

The steps run in the caller's runbook (`rb`, passed in): each call is planned in a dry run and audited with
the state it asks for (`replication.expect.ConnectorState`).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from mirrorbook.connect.client import Call, ConnectClient, Endpoints
from mirrorbook.connect.errors import ConnectorNotFound
from mirrorbook.connect.models import ConnectorStatus
from mirrorbook.connect.wait import WaitTimeout, reached, wait_for
from mirrorbook.replication.connect_calls import mutate_connect
from mirrorbook.replication.backend import TARGET_ACTION
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


def set_connector_state(rb: "Runbook", client: ConnectClient, flow: FlowSpec, role: str, target: str, *,
                        wait: bool = True, timeout_s: float = 120.0) -> "StepOutcome":
    name = flow.connector(role)
    verb = TARGET_ACTION[target]
    with rb.step(f"connector.{verb}", flow.name) as step:
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
        if wait and not rb.dry_run:
            status = wait_caused(client, name, target, timeout_s, restarted=call is not None and call.method == "POST")
        step.settle(connector_state(status))
    return step.outcome


def roles_for(selection: str, target: str) -> list[str]:
    """`all` or one role, in the order that keeps replication consistent for the target state."""
    order = ORDER_UP if target == "RUNNING" else ORDER_DOWN
    return list(order) if selection == "all" else [selection]


def set_flow_state(rb: "Runbook", client: ConnectClient, flow: FlowSpec, selection: str, target: str, *,
                   wait: bool = True, timeout_s: float = 120.0) -> list["StepOutcome"]:
    roles = roles_for(selection, target)
    if wait or target == "RUNNING" or len(roles) == 1 or rb.dry_run:
        return [set_connector_state(rb, client, flow, role, target, wait=wait, timeout_s=timeout_s)
                for role in roles]
    return _request_at_once(rb, client, flow, roles, target)


def _request_at_once(rb: "Runbook", client: ConnectClient, flow: FlowSpec, roles: list[str], target: str
                     ) -> list["StepOutcome"]:
    """`set_connector_state` of each part without waiting, the parts' calls sent side by side: Connect's herder
    takes stop requests that arrive together in one round (three stops in a row took 3.7 s on the scale
    benchmark's stack, together 0.4 s). Each part is still its own step, opened, recorded and closed in `roles`'
    order (the source first on the way down), each call's intent on record before the call."""
    verb = TARGET_ACTION[target]
    opened: list[tuple[Any, Any, str, Any]] = []  # (its context, step, connector, (call, precondition))
    try:
        for role in roles:
            name = flow.connector(role)
            cm = rb.step(f"connector.{verb}", flow.name)
            step = cm.__enter__()
            opened.append((cm, step, name, None))
            status = client.status(name)
            step.observe(connector_state(status))
            step.note(connector=name, role=role, target=target)
            call = decide(status, target)
            if call is None and reached(status, target):
                step.note(reason=f"already {target}")
            step.settle(connector_state(status))
            if call is not None:
                opened[-1] = (cm, step, name, (call, f"{name} is {status.summary()}; wanted {target}"))
    except BaseException as exc:
        _close_all(opened, exc)
        raise

    def send(item: tuple[Any, Any, str, Any]) -> BaseException | None:
        _, step, name, (call, precondition) = item
        try:
            mutate_connect(step, client, call, action=f"connector.{verb}",
                           expect=ConnectorState(connector=name, state=target), precondition=precondition)
        except BaseException as exc:  # closed with its step below
            return exc
        return None

    sending = [item for item in opened if item[3] is not None]
    with ThreadPoolExecutor(max_workers=max(1, len(sending)), thread_name_prefix="connector") as pool:
        failures = dict(zip([id(item) for item in sending], pool.map(send, sending)))
    first: BaseException | None = None
    for item in opened:
        exc = failures.get(id(item))
        _close(item[0], exc)
        first = first or exc
    if first is not None:
        raise first
    return [item[1].outcome for item in opened]


def _close(cm: Any, exc: BaseException | None) -> None:
    """Leave a step opened by hand: normally, or with `exc` (the step records it; the caller raises it)."""
    if exc is None:
        cm.__exit__(None, None, None)
        return
    try:
        cm.__exit__(type(exc), exc, exc.__traceback__)
    except BaseException as raised:  # the step re-raises what it recorded
        if raised is not exc:
            raise


def _close_all(opened: list[tuple[Any, Any, str, Any]], exc: BaseException) -> None:
    for i, item in enumerate(opened):
        _close(item[0], exc if i == len(opened) - 1 else None)


def parts_status(client: ConnectClient, flow: FlowSpec, deadline_s: float) -> dict[str, ConnectorStatus | None]:
    """Each of the flow's connectors as Connect shows it, all read within one deadline (None: Connect has no
    such connector). Raises the ConnectError of the first read that fails."""
    end = time.monotonic() + deadline_s
    out: dict[str, ConnectorStatus | None] = {}
    for role, name in flow.connectors.items():
        try:
            # Every read gets what is left, and never less than one short attempt.
            out[role] = client.run(Endpoints.status(name), deadline_s=max(0.5, end - time.monotonic()))
        except ConnectorNotFound:
            out[role] = None
    return out
