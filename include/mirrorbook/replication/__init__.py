"""Replication backends: how a flow is replicated, behind one seam (see `backend.py`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mirrorbook.replication.backend import FlowTarget, OffsetMapping, ReplicationBackend

if TYPE_CHECKING:
    from mirrorbook.clients import Clients
    from mirrorbook.mm2.flows import FlowStatus
    from mirrorbook.topology import FlowSpec

BACKENDS = ("mm2-connect",)


def backend_for(clients: "Clients", flow: "FlowSpec") -> ReplicationBackend:
    """The backend that replicates `flow` (MirrorMaker 2 on Connect: the one there is today)."""
    from mirrorbook.replication import mm2_connect

    return mm2_connect.backend(clients, flow)


async def all_status(clients: "Clients", flows: "list[FlowSpec] | None" = None, *,
                     with_lag: bool = True) -> "list[FlowStatus]":
    """Every flow's status at once, each backend batching its own requests."""
    from mirrorbook.replication import mm2_connect

    return await mm2_connect.all_status(clients, flows if flows is not None else clients.topology.flows,
                                        with_lag=with_lag)


__all__ = ["BACKENDS", "FlowTarget", "OffsetMapping", "ReplicationBackend", "all_status", "backend_for"]
