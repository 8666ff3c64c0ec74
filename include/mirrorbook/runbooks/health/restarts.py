"""Restarting a flow's FAILED connectors and tasks: through the runbook engine (each call audited), under
the flow's lock."""

from __future__ import annotations

from mirrorbook.clients import Clients
from mirrorbook.errors import GateRefused, MirrorbookError
from mirrorbook.mm2.flows import FlowStatus
from mirrorbook.replication import backend_for
from mirrorbook.runbooks import lock
from mirrorbook.core.engine import Runbook
from mirrorbook.topology import FlowSpec


def failed_roles(status: FlowStatus) -> list[str]:
    """Roles to restart: a FAILED connector, or FAILED tasks of a RUNNING one. Paused and stopped
    connectors are an operator's decision: never touched."""
    return [role for role, c in status.connectors.items()
            if c.state == "FAILED" or (c.state == "RUNNING" and "FAILED" in c.tasks)]


def restart_failed(rb: Runbook, clients: Clients, flow: FlowSpec, roles: list[str], timeout_s: float) -> list[str]:
    """Restart through the runbook engine (each call audited) under the flow's lock; one note per connector."""
    try:
        lock.acquire(rb, [flow], clients)
    except GateRefused as exc:
        return [f"not restarted: {exc.message}"]
    notes = []
    backend = backend_for(clients, flow)
    try:
        for role in roles:
            name = flow.connector(role)
            try:
                backend.set_state(rb, "RUNNING", parts=role, timeout_s=timeout_s)
                notes.append(f"{name}: restarted FAILED parts, RUNNING again")
            except MirrorbookError as exc:
                notes.append(f"{name}: restart did not bring it back: {exc.message}")
    finally:
        lock.release(rb, [flow])
    return notes
