"""Triggers for the failover gates: replication drained, consumer groups inactive."""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator, Awaitable, Callable

from airflow.triggers.base import BaseTrigger, TriggerEvent

from mirrorbook.airflow.hooks.mirrorbook import AsyncAirflowResolver
from mirrorbook.clients import Clients
from mirrorbook.errors import MirrorbookError
from mirrorbook.replication import backend_for
from mirrorbook.runbooks.checks import active_groups, describe_behind, drained, not_drained
from mirrorbook.runbooks.plan import managed_groups
from mirrorbook.topology import Topology, load_topology


class _PollingTrigger(BaseTrigger):
    """Polls `check()` until it reports done or the timeout passes; subclasses say what is checked."""

    def __init__(self, *, timeout_s: float = 600.0, poll_s: float = 2.0, topology_path: str | None = None) -> None:
        super().__init__()
        self.timeout_s, self.poll_s, self.topology_path = timeout_s, poll_s, topology_path

    def _kwargs(self) -> dict[str, Any]:
        return {"timeout_s": self.timeout_s, "poll_s": self.poll_s, "topology_path": self.topology_path}

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{type(self).__module__}.{type(self).__qualname__}", {**self._kwargs(), **self.own_kwargs()}

    def own_kwargs(self) -> dict[str, Any]:
        raise NotImplementedError

    async def check(self, clients: Clients, topology: Topology) -> tuple[bool, dict[str, Any]]:
        raise NotImplementedError

    async def run(self) -> AsyncIterator[TriggerEvent]:
        deadline = time.monotonic() + self.timeout_s
        try:
            topology = load_topology(self.topology_path)
            clients = await AsyncAirflowResolver(topology).aclients()
            yield await poll(lambda: self.check(clients, topology), deadline, self.poll_s)
        except MirrorbookError as exc:
            yield TriggerEvent({"status": "error", "message": str(exc)})


async def poll(check: Callable[[], Awaitable[tuple[bool, dict[str, Any]]]], deadline: float,
               poll_s: float) -> TriggerEvent:
    """`check()` every `poll_s` until it reports done (success) or the monotonic `deadline` passes (timeout);
    the event carries what the last check said."""
    while True:
        done, info = await check()
        if done:
            return TriggerEvent({"status": "success", **info})
        if time.monotonic() >= deadline:
            return TriggerEvent({"status": "timeout", **info})
        await asyncio.sleep(poll_s)


class ReplicationDrainedTrigger(_PollingTrigger):
    """Every data partition of the flow within `max_lag` records of the source high watermark."""

    def __init__(self, *, flow: str, max_lag: int = 0, topics: list[str] | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.flow, self.max_lag, self.topics = flow, max_lag, topics

    def own_kwargs(self) -> dict[str, Any]:
        return {"flow": self.flow, "max_lag": self.max_lag, "topics": self.topics}

    async def check(self, clients: Clients, topology: Topology) -> tuple[bool, dict[str, Any]]:
        status = await backend_for(clients, topology.flow(self.flow)).astatus(count_above=self.max_lag)
        ok, behind = drained(status, self.max_lag, set(self.topics) if self.topics else None)
        return ok, {"behind": describe_behind(behind), "total_lag": sum(behind.values()),
                    "state": status.state.value,
                    "message": not_drained(status, behind, self.max_lag, self.timeout_s)}


class GroupsInactiveTrigger(_PollingTrigger):
    """Every consumer group matching `groups_regex` EMPTY or absent on `cluster`."""

    def __init__(self, *, cluster: str, groups_regex: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.cluster, self.groups_regex = cluster, groups_regex

    def own_kwargs(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "groups_regex": self.groups_regex}

    async def check(self, clients: Clients, topology: Topology) -> tuple[bool, dict[str, Any]]:
        admin = clients.admin(self.cluster)
        groups = await asyncio.to_thread(managed_groups, admin, self.groups_regex)
        active = await asyncio.to_thread(active_groups, admin, groups)
        names = ", ".join(f"{g} ({i.state}, {i.members} members)" for g, i in sorted(active.items()))
        return not active, {"active": sorted(active), "message": f"consumer groups still active on {self.cluster} "
                            f"after {self.timeout_s:.0f}s: {names}; stop those consumers"}
