"""Triggers for long waits on a flow's replication, run by the triggerer (they live in the installed package).

A trigger holds only what serializes (the flow's name, the parts, the target, the topology's path) and builds
the flow's backend from those when it runs, its connections resolved without blocking the event loop.
"""

from __future__ import annotations

from typing import Any, AsyncIterator

from airflow.triggers.base import BaseTrigger, TriggerEvent

from mirrorbook.airflow.hooks.mirrorbook import AsyncAirflowResolver
from mirrorbook.connect import ConnectError
from mirrorbook.errors import MirrorbookError
from mirrorbook.replication import backend_for
from mirrorbook.topology import load_topology
from mirrorbook.replication.backend import FlowTarget


class ConnectorStateTrigger(BaseTrigger):
    """Fires when the flow's `parts` (all, or one role) show `target` (STOPPED: also no tasks), or on timeout."""

    def __init__(self, *, flow: str, parts: str, target: FlowTarget, timeout_s: float = 600.0, poll_s: float = 1.0,
                 topology_path: str | None = None) -> None:
        super().__init__()
        self.flow, self.parts, self.target = flow, parts, target
        self.timeout_s, self.poll_s, self.topology_path = timeout_s, poll_s, topology_path

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"flow": self.flow, "parts": self.parts, "target": self.target, "timeout_s": self.timeout_s,
                 "poll_s": self.poll_s, "topology_path": self.topology_path})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            topology = load_topology(self.topology_path)
            clients = await AsyncAirflowResolver(topology).aclients()
            backend = backend_for(clients, topology.flow(self.flow))
            states = await backend.await_state(self.target, parts=self.parts,
                                               timeout_s=self.timeout_s, poll_s=self.poll_s)
            yield TriggerEvent({"status": "success", "states": states})
        except (MirrorbookError, ConnectError) as exc:
            yield TriggerEvent({"status": "error", "message": str(exc)})
