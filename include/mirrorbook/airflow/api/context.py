"""What each request works on: the topology (re-read per request, so an edited file is seen at once),
clients resolved through Airflow connections, the flow named in the path, the audit store.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated

from fastapi import Depends, Request

from mirrorbook.airflow.hooks.mirrorbook import AsyncAirflowResolver
from mirrorbook.audit import AuditStore
from mirrorbook.clients import Clients
from mirrorbook.topology import FlowSpec, Topology, load_topology


def topology() -> Topology:
    return load_topology()


TopologyDep = Annotated[Topology, Depends(topology)]


async def clients(topo: TopologyDep) -> Clients:
    """Every cluster of the topology resolved up front, through Airflow connections (topology addresses
    where a connection is not defined): worker threads then never call into Airflow."""
    return await AsyncAirflowResolver(topo).aclients()


ClientsDep = Annotated[Clients, Depends(clients)]


def flow(source: str, target: str, topo: TopologyDep) -> FlowSpec:
    """The flow `{source}/{target}` names; UnknownFlow (404, naming the known flows) otherwise."""
    return topo.flow(f"{source}->{target}")


FlowDep = Annotated[FlowSpec, Depends(flow)]


@lru_cache(maxsize=1)
def audit_store() -> AuditStore:
    """One store per process (`MIRRORBOOK_AUDIT_URL`, else `$AIRFLOW_HOME/mirrorbook/audit.db`)."""
    return AuditStore.from_env()


AuditDep = Annotated[AuditStore, Depends(audit_store)]


def base_path(request: Request) -> str:
    """Where this app is mounted (e.g. `/mirrorbook`): HATEOAS links must be navigable as given."""
    return str(request.scope.get("root_path", "")).rstrip("/")


BasePath = Annotated[str, Depends(base_path)]
