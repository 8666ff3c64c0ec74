"""Replication backends: how a flow is replicated, behind one seam (see `backend.py`).

A flow names its backend (`backend:` in the topology, `mm2-connect` by default); each kind is a module with
`backend(clients, flow)` and `all_status(clients, flows, with_lag=)`, imported when a flow first needs it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol, get_args

from mirrorbook.replication.backend import (ACTION_TARGET, TARGET_ACTION, FlowAction, FlowTarget, OffsetMapping,
                                            ReplicationBackend)
from mirrorbook.topology import BackendKind

if TYPE_CHECKING:
    from mirrorbook.clients import Clients
    from mirrorbook.mm2.flows import FlowStatus
    from mirrorbook.topology import FlowSpec

BACKENDS: tuple[str, ...] = get_args(BackendKind)


class _Kind(Protocol):
    """What the module of each backend kind provides."""

    def backend(self, clients: Clients, flow: FlowSpec) -> ReplicationBackend: ...

    async def all_status(self, clients: Clients, flows: list[FlowSpec], *, with_lag: bool) -> list[FlowStatus]: ...


def _module(kind: str) -> _Kind:
    """The module of a backend kind, imported when a flow first needs it."""
    if kind == "mm2-connect":
        from mirrorbook.replication import mm2_connect
        return mm2_connect
    raise KeyError(kind)


def backend_for(clients: "Clients", flow: "FlowSpec") -> ReplicationBackend:
    """The backend that replicates `flow`, of the kind the flow names."""
    return _module(flow.backend).backend(clients, flow)


async def all_status(clients: "Clients", flows: "list[FlowSpec] | None" = None, *,
                     with_lag: bool = True) -> "list[FlowStatus]":
    """Every flow's status at once, in the order given: each backend kind batches its own flows' requests."""
    flows = flows if flows is not None else clients.topology.flows
    kinds = list(dict.fromkeys(f.backend for f in flows))
    batches = await asyncio.gather(*(_module(k).all_status(clients, [f for f in flows if f.backend == k],
                                                           with_lag=with_lag) for k in kinds))
    by_flow = {s.flow: s for batch in batches for s in batch}
    return [by_flow[f.name] for f in flows]


__all__ = ["ACTION_TARGET", "BACKENDS", "TARGET_ACTION", "FlowAction", "FlowTarget", "OffsetMapping",
           "ReplicationBackend", "all_status", "backend_for"]
