"""Where the clients for a topology's clusters come from.

A `Resolver` turns topology aliases into client settings. Under Airflow, `mirrorbook.airflow.hooks` resolves
them through Airflow connections; the CLI through `LookupResolver` — the connection ids found as Airflow finds
them (`mirrorbook.connections`: AIRFLOW_CONN_<ID>, Airflow's own lookup where it is installed, the connections
file) — and either falls back to the addresses written in the topology file (`TopologyResolver`). Everything
above this module asks a resolver, never a file or a connection directly.

`Clients.per_pass()` is the view one pass over many flows uses (the health check): one admin per
Kafka cluster, whichever aliases name it, and one topic listing each.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any, Mapping, Protocol

from mirrorbook.connect import AsyncConnectClient, ConnectClient, ConnectSettings
from mirrorbook.errors import MirrorbookError
from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.redaction import get_logger
from mirrorbook.topology import FlowSpec, Topology


if TYPE_CHECKING:
    from mirrorbook.connections import Lookup

log = get_logger(__name__)

class Resolver(Protocol):
    topology: Topology

    def connect_settings(self, connect_alias: str) -> ConnectSettings: ...

    def kafka_config(self, cluster_alias: str) -> dict[str, Any]: ...


class TopologyResolver:
    """Addresses straight from the topology file (`bootstrap_servers`, `url`) — or, for an id `_connection`
    finds (Airflow's connections, the CLI's lookup), that connection's settings: a connection wins over the
    topology's address."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology

    def _connection(self, conn_id: str) -> Any | None:
        """The connection named `conn_id`, or None: here never (subclasses look connections up)."""
        return None

    def looked_in(self, conn_id: str) -> str:
        """Where `_connection` looks for `conn_id`, in its order (for the message when nothing defines it)."""
        return "Airflow's connections"

    def connect_settings(self, connect_alias: str) -> ConnectSettings:
        spec = self.topology.connect_clusters.get(connect_alias)
        return self.connect_settings_from(connect_alias, self._connection(spec.connection_id) if spec else None)

    def _undefined(self, what: str, alias: str, field: str, conn_id: str | None) -> MirrorbookError:
        if conn_id is None:
            return MirrorbookError(f"{what} {alias!r} is not in the topology")
        return MirrorbookError(f"{what} {alias!r} has no {field} in the topology, and its connection {conn_id!r} is "
                               f"defined nowhere: looked in {self.looked_in(conn_id)}",
                               f"define the connection {conn_id!r} in one of those places, or add `{field}:` to the "
                               "topology")

    def connect_settings_from(self, connect_alias: str, conn: Any | None) -> ConnectSettings:
        """The alias's settings from its connection (looked up already), or from the topology's url."""
        spec = self.topology.connect_clusters.get(connect_alias)
        if conn is not None:
            from mirrorbook.connections import settings_from_connection

            return settings_from_connection(conn).model_copy(update={"name": connect_alias})
        if spec is None or not spec.url:
            raise self._undefined("Connect cluster", connect_alias, "url", spec.connection_id if spec else None)
        return ConnectSettings(url=spec.url, name=connect_alias)

    def kafka_config(self, cluster_alias: str) -> dict[str, Any]:
        spec = self.topology.clusters.get(cluster_alias)
        return self.kafka_config_from(cluster_alias, self._connection(spec.connection_id) if spec else None)

    def kafka_config_from(self, cluster_alias: str, conn: Any | None) -> dict[str, Any]:
        """The alias's client config from its connection's extra (looked up already), or the topology's address."""
        spec = self.topology.clusters.get(cluster_alias)
        if conn is not None and spec is not None:
            from mirrorbook.connections import kafka_config_from_connection

            return kafka_config_from_connection(conn)
        if spec is None or not spec.bootstrap_servers:
            raise self._undefined("Kafka cluster", cluster_alias, "bootstrap_servers",
                                  spec.connection_id if spec else None)
        return {"bootstrap.servers": spec.bootstrap_servers}


class LookupResolver(TopologyResolver):
    """The CLI's: a topology's connection ids through a `connections.Lookup` (AIRFLOW_CONN_<ID>, Airflow's own
    lookup, the connections file — see `mirrorbook.connections`), falling back to the topology's addresses."""

    def __init__(self, topology: Topology, lookup: "Lookup") -> None:
        super().__init__(topology)
        self.lookup = lookup

    def _connection(self, conn_id: str) -> Any | None:
        found = self.lookup.get(conn_id)
        if found is not None:  # which of the places it came from (`-v`): the one to fix when a cluster refuses it
            log.info("connection %r: from %s", conn_id, getattr(found, "origin", "") or "the connections given")
        return found

    def looked_in(self, conn_id: str) -> str:
        return self.lookup.searched(conn_id)


class FileResolver(LookupResolver):
    """Connections at hand (a connections file's, read already), falling back to the topology's addresses."""

    def __init__(self, topology: Topology, connections: Mapping[str, Any]) -> None:
        from mirrorbook.connections import Lookup, MappingSource

        super().__init__(topology, Lookup([MappingSource(connections)]))


def cli_clients(topology_path: str | None = None, topology: Topology | None = None,
                lookup: "Lookup | None" = None) -> "Clients":
    """Clients for a CLI command: the topology file (or `topology`, read from it already), its connection ids
    resolved through `lookup` — by default the CLI's (`connections.cli_lookup`: AIRFLOW_CONN_<ID>, Airflow's
    own lookup where installed and configured, the connections file)."""
    from mirrorbook.connections import cli_lookup
    from mirrorbook.topology import load_topology

    topo = topology if topology is not None else load_topology(topology_path)
    return Clients(LookupResolver(topo, lookup if lookup is not None else cli_lookup(topology_path)))


class Clients:
    """Client factory for one topology: Connect clients per Connect cluster, admins per Kafka cluster."""

    def __init__(self, resolver: Resolver) -> None:
        self.resolver = resolver
        self.topology = resolver.topology
        self._admins: dict[str, KafkaAdmin] = {}
        self._admins_lock = threading.Lock()  # flows of one pass ask from worker threads

    def connect(self, flow: FlowSpec, **kw: Any) -> ConnectClient:
        return ConnectClient(self.resolver.connect_settings(flow.connect_cluster), **kw)

    def async_connect(self, flow: FlowSpec, **kw: Any) -> AsyncConnectClient:
        return AsyncConnectClient(self.resolver.connect_settings(flow.connect_cluster), **kw)

    def kafka_config(self, alias: str) -> dict[str, Any]:
        return self.resolver.kafka_config(alias)

    def admin(self, alias: str) -> KafkaAdmin:
        """The alias's admin, made once (`new_admin`) and kept."""
        with self._admins_lock:
            if alias not in self._admins:
                self._admins[alias] = self.new_admin(alias)
            return self._admins[alias]

    def new_admin(self, alias: str) -> KafkaAdmin:
        """How an alias's admin is made; `admin` keeps it."""
        return KafkaAdmin(self.kafka_config(alias), name=alias)

    def per_pass(self) -> Clients:
        """These clients for one pass over many flows; see `PassClients`."""
        return PassClients(self)


class PassClients(Clients):
    """`base`'s clients for one pass over many flows: its Connect clients and settings as they are; one admin
    per distinct Kafka client config — aliases with the same config are the same cluster and share it, with
    its connections — made by `base` and listing topics once for the whole pass (`KafkaAdmin.per_pass`).
    Make one per pass: a listing kept longer would hide topics created since."""

    def __init__(self, base: Clients) -> None:
        super().__init__(base.resolver)
        self.base = base
        self._by_config: dict[str, KafkaAdmin] = {}

    def connect(self, flow: FlowSpec, **kw: Any) -> ConnectClient:
        return self.base.connect(flow, **kw)

    def async_connect(self, flow: FlowSpec, **kw: Any) -> AsyncConnectClient:
        return self.base.async_connect(flow, **kw)

    def kafka_config(self, alias: str) -> dict[str, Any]:
        return self.base.kafka_config(alias)

    def new_admin(self, alias: str) -> KafkaAdmin:
        key = json.dumps(self.kafka_config(alias), sort_keys=True, default=str)  # a dict key, never shown
        if key not in self._by_config:  # `admin` holds the lock
            self._by_config[key] = self.base.admin(alias).per_pass()
        return self._by_config[key]
