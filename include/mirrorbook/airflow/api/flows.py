"""KIP-1144's read endpoints: `GET /`, `GET /{source}/{target}`, `GET /{source}/{target}/connectors`.

Flow state and the parts come from each flow's replication backend (`mirrorbook.replication`; for MM2 on
Connect, the KIP's formula for Connect-hosted flows); this module only shapes them, prefixes the links, and
keeps secrets out of what the backend returns.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Query

from mirrorbook.airflow.api.auth import Reader
from mirrorbook.airflow.api.context import BasePath, ClientsDep, FlowDep, TopologyDep
from mirrorbook.airflow.api.links import rebased
from mirrorbook.airflow.api.models import OverviewOut
from mirrorbook.airflow.api.redaction import public_bootstrap, public_config
from mirrorbook.clients import Clients
from mirrorbook.connect.models import ConnectorView
from mirrorbook.replication import all_status, backend_for
from mirrorbook.redaction import redact
from mirrorbook.topology import CONNECTOR_CLASSES, Topology

router = APIRouter()
Expand = Literal["info", "status"]


@router.get("/", response_model=OverviewOut, summary="Every flow with its KIP-1144 state, and the clusters")
async def overview(_: Reader, topo: TopologyDep, clients: ClientsDep, base: BasePath) -> dict[str, Any]:
    statuses = await all_status(clients, with_lag=False)
    return {"flows": {s.flow: rebased(s.kip1144_summary(), base) for s in statuses},
            "clusters": cluster_map(topo, clients)}


def cluster_map(topo: Topology, clients: Clients) -> dict[str, str]:
    return {alias: public_bootstrap(clients.kafka_config(alias)) for alias in topo.clusters}


@router.get("/{source}/{target}", summary="One flow: state, connectors, replicated topics, lag, links")
async def flow_detail(_: Reader, flow: FlowDep, clients: ClientsDep, base: BasePath) -> dict[str, Any]:
    status = await backend_for(clients, flow).astatus(with_lag=True)
    return rebased(status.kip1144_detail(), base)


@router.get("/{source}/{target}/connectors",
            summary="The flow's connectors keyed by class, as Connect's expand=info/status shows them (secrets masked)")
async def flow_connectors(_: Reader, flow: FlowDep, clients: ClientsDep,
                          expand: list[Expand] = Query(default=[])) -> Any:
    if not expand:
        return list(CONNECTOR_CLASSES.values())
    return connectors_body(await backend_for(clients, flow).adescribe_parts(), set(expand))


def connectors_body(views: dict[str, ConnectorView | None], expand: set[str]) -> dict[str, Any]:
    """`{"MirrorSourceConnector": {"info": ..., "status": ...}, ...}` from the parts by role; a connector
    missing on Connect shows `null` for what was asked, so the three classes are always there."""
    out: dict[str, Any] = {}
    for role in CONNECTOR_CLASSES:
        view = views.get(role)
        entry: dict[str, Any] = {}
        if "info" in expand:
            info = view.info if view else None
            entry["info"] = None if info is None else {**info.model_dump(mode="json"),
                                                       "config": public_config(info.config)}
        if "status" in expand:
            status = view.status if view else None
            entry["status"] = None if status is None else redact(status.model_dump(mode="json", exclude_none=True))
        out[CONNECTOR_CLASSES[role]] = entry
    return out
