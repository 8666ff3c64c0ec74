"""A MirrorMaker 2 flow's status as MM2 on Connect shows it: its connectors read from the Connect REST API and
both clusters' offsets, fetched concurrently, then put together by the pure rules of `mm2.flows` (KIP-1144 state,
connector summaries, lag in records)."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from mirrorbook.clients import Clients
from mirrorbook.connect import AsyncConnectClient, ConnectError
from mirrorbook.connect.models import ConnectorOffsets, ConnectorView
from mirrorbook.errors import Refused
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.flows import (FlowStatus, PartitionLag, Unreadable, compute_lag, detailed_state, replicated_topics,
                                  summarize_connectors)
from mirrorbook.mm2.lag import count_lag
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.topology import FlowSpec

class StatusReads(Protocol):
    """What a flow's status reads from Connect: a client's answers, or a listing its cluster's flows share."""

    async def list(self, expand: tuple[str, ...] = ()) -> Any: ...

    async def get_offsets(self, name: str) -> ConnectorOffsets: ...


async def async_flow_status(clients: Clients, flow: FlowSpec, *, with_lag: bool = True,
                            connect: StatusReads | None = None, count_above: int = 0) -> FlowStatus:
    """Everything a flow's status needs, fetched concurrently (Connect and both clusters at once). Lag is
    counted in records wherever its offsets exceed `count_above` (a gate's max_lag: within it by offsets is
    within it by records)."""
    own: AsyncConnectClient | None = None  # a client made here is closed here
    client = connect
    if client is None:
        client = own = clients.async_connect(flow)
    errors: list[str] = []
    try:
        views_task = asyncio.create_task(client.list(("status", "info")))
        offsets_task = asyncio.create_task(client.get_offsets(flow.connector("source"))) if with_lag else None
        target_task = asyncio.to_thread(_target_view, clients, flow.target)
        source_task = asyncio.to_thread(_source_topics, clients, flow.source) if with_lag else None
        views: dict[str, ConnectorView] | None
        unreadable: Unreadable | None = None
        try:
            views = await views_task
        except ConnectError as exc:
            views, unreadable = None, Unreadable.of(exc)
            errors.append(unreadable.cause)  # first: the cause leads
        offsets = None
        if offsets_task is not None:
            try:
                offsets = await offsets_task
            except ConnectError as exc:
                if views is not None:
                    errors.append(f"offsets of {flow.connector('source')}: {exc.message}")
        target_topics, cluster_id = await _guard(target_task, errors, f"cluster {flow.target}", ([], None))
        source_parts = await _guard(source_task, errors, f"cluster {flow.source}", None) if source_task else None
    finally:
        if own is not None:
            await own.close()

    connectors = summarize_connectors(flow, views, unreadable.cause if unreadable else None)
    detail = detailed_state(connectors, views is not None)
    offsets_topics = {t for e in (offsets.offsets if offsets else []) if isinstance(t := e.partition.get("topic"), str)}
    topics = replicated_topics(flow, target_topics, offsets_topics)
    lag: list[PartitionLag] = []
    # Lag needs the source connector's offsets: with Connect unreadable it is not known (and not shown as a figure).
    if with_lag and source_parts is not None and views is not None:
        highs, lows = source_parts
        policy = ReplicationPolicy.for_flow(flow)
        mirrored = {tp for tp in highs if policy.format_remote_topic(flow.source, tp.topic) in set(topics)
                    or tp.topic in offsets_topics}
        lag = compute_lag(flow, offsets, {tp: h for tp, h in highs.items() if tp in mirrored}, lows)
        lag = await _guard(asyncio.to_thread(count_lag, clients.admin(flow.source), lag, above=count_above),
                           errors, f"records of cluster {flow.source} (lag by offsets shown)", lag)
    return FlowStatus(flow=flow.name, source=flow.source, target=flow.target, connect_cluster=flow.connect_cluster,
                      state=detail.state(), detailed_state=detail, connectors=connectors,
                      replicated_topics=topics, kafka_cluster_id=cluster_id, lag=lag,
                      total_lag=sum(p.lag for p in lag), max_lag=max((p.lag for p in lag), default=0), errors=errors,
                      unreadable=unreadable)


async def _guard(aw: Any, errors: list[str], what: str, default: Any) -> Any:
    try:
        return await aw
    except Exception as exc:  # a down cluster must not hide the rest of the status
        # A refusal names its cluster and leads with who refused what: said as it is.
        errors.append(str(exc) if isinstance(exc, Refused) else f"{what}: {exc}")
        return default


def _target_view(clients: Clients, alias: str) -> tuple[list[str], str | None]:
    admin = clients.admin(alias)
    return sorted(admin.topics()), admin.cluster_id()


def _source_topics(clients: Clients, alias: str) -> tuple[dict[TP, int], dict[TP, int]]:
    admin = clients.admin(alias)
    policy = ReplicationPolicy()
    tps = admin.partitions([t for t in admin.topics() if not policy.is_internal_topic(t)])
    marks = admin.watermarks(tps)
    return {tp: w.high for tp, w in marks.items()}, {tp: w.low for tp, w in marks.items()}


def flow_status(clients: Clients, flow: FlowSpec, *, with_lag: bool = True, count_above: int = 0) -> FlowStatus:
    return asyncio.run(async_flow_status(clients, flow, with_lag=with_lag, count_above=count_above))


class _SharedListing:
    """A Connect client's reads whose connector listing (status + info of every connector on the cluster) is
    fetched once and shared by all the cluster's flows; the offsets are read through."""

    def __init__(self, client: AsyncConnectClient) -> None:
        self._client = client
        self._listings: dict[tuple[str, ...], asyncio.Future[Any]] = {}

    async def get_offsets(self, name: str) -> ConnectorOffsets:
        return await self._client.get_offsets(name)

    async def list(self, expand: tuple[str, ...] = ()) -> Any:
        if expand not in self._listings:
            self._listings[expand] = asyncio.ensure_future(self._client.list(expand))
        return await asyncio.shield(self._listings[expand])


async def async_all_flow_status(clients: Clients, flows: list[FlowSpec] | None = None,
                                with_lag: bool = True) -> list[FlowStatus]:
    """Every flow at once, with one Connect client and one connector listing per Connect cluster
    (building a client costs a TLS context, ~0.1 s of CPU; the listing covers all its flows)."""
    flows = flows if flows is not None else clients.topology.flows
    first = {f.connect_cluster: f for f in reversed(flows)}
    made = await asyncio.gather(*(asyncio.to_thread(clients.async_connect, f) for f in first.values()))
    shared = {cc: _SharedListing(c) for cc, c in zip(first, made)}
    try:
        return list(await asyncio.gather(*(async_flow_status(clients, f, with_lag=with_lag,
                                                             connect=shared[f.connect_cluster])
                                           for f in flows)))
    finally:
        await asyncio.gather(*(c.close() for c in made))


def all_flow_status(clients: Clients, flows: list[FlowSpec] | None = None, with_lag: bool = True) -> list[FlowStatus]:
    return asyncio.run(async_all_flow_status(clients, flows, with_lag))
