"""The trigger mm2_rpo_sampler defers to: the RPO sampler (`runbooks/rpo_sampler.py`) running in the triggerer's
event loop for one period — a task that waits without holding a worker slot."""

from __future__ import annotations

from typing import Any, AsyncIterator

from airflow.triggers.base import BaseTrigger, TriggerEvent

from mirrorbook.airflow.hooks.mirrorbook import AsyncAirflowResolver
from mirrorbook.audit import AuditStore
from mirrorbook.errors import MirrorbookError
from mirrorbook.runbooks.rpo_sampler import run_sampler
from mirrorbook.topology import load_topology


class RpoSamplerTrigger(BaseTrigger):
    """Samples `flows` every `poll_s` for `duration_s`, keeping each one's newest sample in the audit store."""

    def __init__(self, *, flows: list[str], duration_s: float, poll_s: float, topology_path: str | None = None) -> None:
        super().__init__()
        self.flows, self.duration_s, self.poll_s, self.topology_path = flows, duration_s, poll_s, topology_path

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"flows": self.flows, "duration_s": self.duration_s, "poll_s": self.poll_s,
                 "topology_path": self.topology_path})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            topology = load_topology(self.topology_path)
            clients = await AsyncAirflowResolver(topology).aclients()
            flows = [topology.flow(name) for name in self.flows]
            done = await run_sampler(clients, flows, AuditStore.from_env(), duration_s=self.duration_s,
                                     poll_s=self.poll_s)
            yield TriggerEvent({"status": "success", **done.model_dump()})
        except MirrorbookError as exc:
            yield TriggerEvent({"status": "error", "message": str(exc)})
