"""Triggers for long waits on Connect, run by the triggerer (they live in the installed package)."""

from __future__ import annotations

import time
from typing import Any, AsyncIterator

from airflow.triggers.base import BaseTrigger, TriggerEvent

from mirrorbook.airflow.hooks.mirrorbook import AsyncAirflowResolver
from mirrorbook.connect import AsyncConnectClient, ConnectError
from mirrorbook.connect.wait import async_wait_for
from mirrorbook.errors import MirrorbookError
from mirrorbook.topology import load_topology


class ConnectorStateTrigger(BaseTrigger):
    """Fires when every named connector shows `target` (STOPPED: also `tasks == []`), or on timeout."""

    def __init__(self, *, flow: str, connectors: list[str], target: str, timeout_s: float = 600.0,
                 poll_s: float = 1.0, topology_path: str | None = None) -> None:
        super().__init__()
        self.flow, self.connectors, self.target = flow, list(connectors), target
        self.timeout_s, self.poll_s, self.topology_path = timeout_s, poll_s, topology_path

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"flow": self.flow, "connectors": self.connectors, "target": self.target,
                 "timeout_s": self.timeout_s, "poll_s": self.poll_s, "topology_path": self.topology_path})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        deadline = time.monotonic() + self.timeout_s
        try:
            topology = load_topology(self.topology_path)
            flow = topology.flow(self.flow)
            settings = await AsyncAirflowResolver(topology).aconnect_settings(flow.connect_cluster)
            states = {}
            async with AsyncConnectClient(settings) as client:
                for name in self.connectors:
                    st = await async_wait_for(client, name, self.target, poll_s=self.poll_s,
                                              timeout_s=max(1.0, deadline - time.monotonic()))
                    states[name] = st.summary()
            yield TriggerEvent({"status": "success", "states": states})
        except (MirrorbookError, ConnectError) as exc:
            yield TriggerEvent({"status": "error", "message": str(exc)})
