"""MirrorbookHook: the topology's clusters through Airflow connections, plus the audit store.

Kafka clusters use the official Kafka provider's `kafka` connection type (its extra holds the
client config, e.g. bootstrap.servers, security.protocol, sasl.*); Connect clusters use ours. When a
topology entry's connection is not defined in Airflow, the address written in the topology is used
(that is how the devstack topology works out of the box) — and if there is none, the error says so.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from mirrorbook.audit import AuditStore
from mirrorbook.clients import Clients, TopologyResolver
from mirrorbook.connect import ConnectSettings
from mirrorbook.topology import Topology, load_topology


class AirflowResolver(TopologyResolver):
    """Aliases -> client settings through Airflow connections, falling back to topology addresses."""

    def _connection(self, conn_id: str) -> Any | None:
        try:
            return BaseHook.get_connection(conn_id)
        except AirflowNotFoundException:
            return None


class AsyncAirflowResolver(AirflowResolver):
    """For triggers: resolves connections with `aget_connection` (the triggerer's event loop must not block)."""

    async def _aconnection(self, conn_id: str) -> Any | None:
        try:
            return await BaseHook.aget_connection(conn_id)
        except AirflowNotFoundException:
            return None

    async def aconnect_settings(self, connect_alias: str) -> ConnectSettings:
        spec = self.topology.connect_clusters.get(connect_alias)
        return self.connect_settings_from(connect_alias, await self._aconnection(spec.connection_id) if spec else None)

    async def akafka_config(self, cluster_alias: str) -> dict[str, Any]:
        spec = self.topology.clusters.get(cluster_alias)
        return self.kafka_config_from(cluster_alias, await self._aconnection(spec.connection_id) if spec else None)

    async def aclients(self) -> Clients:
        """A Clients whose settings were all resolved up front, so threads never touch Airflow's comms."""
        connect = {a: await self.aconnect_settings(a) for a in self.topology.connect_clusters}
        kafka = {a: await self.akafka_config(a) for a in self.topology.clusters}
        return Clients(_Resolved(self.topology, connect, kafka))


class _Resolved:
    def __init__(self, topology: Topology, connect: dict[str, ConnectSettings], kafka: dict[str, dict]) -> None:
        self.topology, self._connect, self._kafka = topology, connect, kafka

    def connect_settings(self, connect_alias: str) -> ConnectSettings:
        return self._connect[connect_alias]

    def kafka_config(self, cluster_alias: str) -> dict[str, Any]:
        return self._kafka[cluster_alias]


class MirrorbookHook(BaseHook):
    """Everything a runbook task needs: the topology, clients resolved through connections, the audit store."""

    hook_name = "mirrorbook"

    def __init__(self, topology_path: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.topology_path = topology_path
        self._topology: Topology | None = None
        self._clients: Clients | None = None

    @property
    def topology(self) -> Topology:
        if self._topology is None:
            self._topology = load_topology(self.topology_path)
        return self._topology

    @property
    def clients(self) -> Clients:
        if self._clients is None:
            self._clients = Clients(AirflowResolver(self.topology))
        return self._clients

    def audit(self) -> AuditStore:
        return AuditStore.from_env()

    def get_conn(self) -> Clients:
        return self.clients
