"""MirrorMaker 2 on Kafka Connect: the replication backend of the first release.

A flow is three connectors on one Connect cluster (source, checkpoint, heartbeat — the `parts`); its
state follows KIP-1144 (`mm2.flows`), its controls are Connect's pause/resume/stop (KIP-875 STOPPED,
`mm2_connect_states`), its replicated positions are the MirrorSourceConnector's offsets, its offset
mapping is MM2's checkpoints and offset-syncs, and its own offsets are the connectors' KIP-875 offsets
(`mm2_connect_offsets`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Sequence

from mirrorbook.booleans import parse_bool
from mirrorbook.clients import Clients
from mirrorbook.connect.errors import ConnectError
from mirrorbook.connect.models import ConnectorOffsets, ConnectorStatus, ConnectorView
from mirrorbook.connect.wait import async_wait_for, reached, wait_for
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.flows import FlowStatus
from mirrorbook.replication.mm2_connect_status import async_all_flow_status, async_flow_status, flow_status
from mirrorbook.replication.backend import FlowTarget, OffsetMapping, OffsetsAction, ReadBack
from mirrorbook.replication.mm2_connect_offsets import change_offsets
from mirrorbook.replication.mm2_connect_states import ORDER_DOWN, parts_status, roles_for, set_flow_state
from mirrorbook.topology import FlowSpec

if TYPE_CHECKING:
    from mirrorbook.core.engine import Runbook, StepOutcome

DEFAULT_CHECKPOINT_INTERVAL_S = 60
DEFAULT_TOPICS_EXCLUDE = r".*[\-\.]internal,.*\.replica,__.*"  # MM2's default topics.exclude


class Mm2ConnectBackend:
    kind = "mm2-connect"

    def __init__(self, clients: Clients, flow: FlowSpec) -> None:
        self.clients, self.flow = clients, flow

    def __repr__(self) -> str:
        return f"Mm2ConnectBackend({self.flow.name} on Connect cluster {self.flow.connect_cluster})"

    @property
    def place(self) -> str:
        return self.clients.resolver.connect_settings(self.flow.connect_cluster).place

    # -- state ------------------------------------------------------------------------------------
    def status(self, *, with_lag: bool = True, count_above: int = 0) -> FlowStatus:
        return flow_status(self.clients, self.flow, with_lag=with_lag, count_above=count_above)

    async def astatus(self, *, with_lag: bool = True, count_above: int = 0) -> FlowStatus:
        return await async_flow_status(self.clients, self.flow, with_lag=with_lag, count_above=count_above)

    def part_states(self, *, deadline_s: float = 5.0) -> dict[str, ConnectorStatus | None]:
        with self.clients.connect(self.flow) as client:
            return parts_status(client, self.flow, deadline_s)

    async def adescribe_parts(self) -> dict[str, ConnectorView | None]:
        async with self.clients.async_connect(self.flow) as client:
            views: dict[str, ConnectorView] = await client.list(("info", "status"))
        return {role: views.get(name) for role, name in self.flow.connector_names.items()}

    def in_state(self, target: FlowTarget, *, parts: str = "all") -> bool:
        with self.clients.connect(self.flow) as client:
            return all(reached(client.status(self.flow.connector(role)), target) for role in roles_for(parts, target))

    @property
    def parts(self) -> tuple[str, ...]:
        return ORDER_DOWN

    def set_state(self, rb: "Runbook", target: FlowTarget, *, parts: str | Sequence[str] = "all", wait: bool = True,
                  timeout_s: float = 120.0) -> list["StepOutcome"]:
        with self.clients.connect(self.flow) as client:
            return set_flow_state(rb, client, self.flow, parts, target, wait=wait, timeout_s=timeout_s)

    def wait_state(self, target: FlowTarget, *, parts: str = "all", timeout_s: float = 120.0) -> dict[str, str]:
        deadline = time.monotonic() + timeout_s
        out = {}
        with self.clients.connect(self.flow) as client:
            for role in roles_for(parts, target):
                status = wait_for(client, self.flow.connector(role), target,
                                  timeout_s=max(1.0, deadline - time.monotonic()))
                out[role] = status.summary()
        return out

    async def await_state(self, target: FlowTarget, *, parts: str = "all", timeout_s: float = 120.0,
                          poll_s: float = 1.0) -> dict[str, str]:
        deadline = time.monotonic() + timeout_s
        out = {}
        async with self.clients.async_connect(self.flow) as client:
            for role in roles_for(parts, target):
                status = await async_wait_for(client, self.flow.connector(role), target, poll_s=poll_s,
                                              timeout_s=max(1.0, deadline - time.monotonic()))
                out[role] = status.summary()
        return out

    def group_writers(self) -> list[str]:
        # MM2 writes group offsets on the target only with sync.group.offsets.enabled (checkpoint connector).
        return ["checkpoint"] if parse_bool(self.setting("checkpoint", "sync.group.offsets.enabled", "false")) else []

    # -- positions and offsets --------------------------------------------------------------------
    def replicated_offsets(self) -> dict[TP, int]:
        return self._replicated(self.own_offsets("source"))

    async def areplicated_offsets(self) -> dict[TP, int]:
        client = self.clients.async_connect(self.flow)
        try:
            return self._replicated((await client.get_offsets(self.flow.connector("source"))).sorted())
        finally:
            await client.close()

    def _replicated(self, offsets: ConnectorOffsets) -> dict[TP, int]:
        return {TP(e.partition["topic"], int(e.partition["partition"])): int(e.offset["offset"])
                for e in offsets.offsets if e.offset and e.partition.get("cluster") == self.flow.source}

    def setting(self, part: str, key: str, default: str) -> str:
        """A connector's setting, or `default` when Connect does not say (unreachable, or not set)."""
        return str(self._config(part).get(key, default))

    def _config(self, part: str) -> dict[str, Any]:
        """A connector's config ({} when Connect does not say)."""
        try:
            with self.clients.connect(self.flow) as client:
                return dict(client.get_config(self.flow.connector(part)))
        except ConnectError:
            return {}

    def offset_mapping(self) -> OffsetMapping:
        source = self._config("source")
        interval = self.setting("checkpoint", "emit.checkpoints.interval.seconds", str(DEFAULT_CHECKPOINT_INTERVAL_S))
        # MM2's source consumer: `source.consumer.` over `consumer.` prefixed settings, else the Java default.
        isolation = source.get("source.consumer.isolation.level") or source.get("consumer.isolation.level")
        return OffsetMapping(offset_syncs_location="target" if source.get("offset-syncs.topic.location") == "target"
                             else "source", checkpoint_interval_s=int(interval),
                             source_isolation="read_committed" if isolation == "read_committed"
                             else "read_uncommitted")

    def replicated_topics_filter(self) -> tuple[str, str]:
        return self.setting("source", "topics", ".*"), self.setting("source", "topics.exclude", DEFAULT_TOPICS_EXCLUDE)

    def own_offsets(self, part: str) -> ConnectorOffsets:
        with self.clients.connect(self.flow) as client:
            return client.get_offsets(self.flow.connector(part)).sorted()

    def change_own_offsets(self, rb: "Runbook", part: str, action: OffsetsAction, *,
                           requested: ConnectorOffsets | None = None, snapshot_id: str | None = None,
                           stop_first: bool = False, timeout_s: float = 120.0, effect: str | None = None,
                           on_read_back: ReadBack | None = None) -> "StepOutcome":
        with self.clients.connect(self.flow) as client:
            return change_offsets(rb, client, self.flow, part, action, requested=requested, snapshot_id=snapshot_id,
                                  stop_first=stop_first, timeout_s=timeout_s, effect=effect,
                                  on_read_back=on_read_back)


async def all_status(clients: Clients, flows: list[FlowSpec], *, with_lag: bool = True) -> list[FlowStatus]:
    """Every flow at once: one Connect client and one connector listing per Connect cluster."""
    return await async_all_flow_status(clients, flows, with_lag=with_lag)


def backend(clients: Clients, flow: FlowSpec, **_: Any) -> Mm2ConnectBackend:
    return Mm2ConnectBackend(clients, flow)
