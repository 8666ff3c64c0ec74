"""One real Airflow (`airflow standalone`) for the e2e module, wired to the session's secured stack
(`devstack up --secure`: SASL_SSL brokers with ACLs, Connect on HTTPS + basic auth), as a production estate is.

- It is the installed product (tests/install.py): the wheel in a venv of its own outside the checkout, the DAG
  folder `mirrorbook dags install` wrote, the plugin by the package's entry point. AIRFLOW_HOME, the Airflow DB
  (SQLite) and mirrorbook's audit store (a SQLite file the tests read too) live in a temp dir.
- MIRRORBOOK_TOPOLOGY points to a file of this fixture's: the devstack's flows plus two scratch flows
  (aliases of cluster A replicating one topic each to B), so the session's A->B is never stopped:
  one scratch flow is failed over, the other is paused/resumed and has its offsets touched.
- The Connect worker on B is reached through a logging proxy (AIRFLOW_CONN_MIRRORBOOK_CONNECT_B), so
  the tests can prove which calls Airflow and the plugin made — e.g. that no PATCH was sent. The proxy serves
  HTTPS with the stack's certificate and passes the basic-auth header on: Airflow's client speaks to it as it
  would to the worker (TLS verified against the stack's CA, basic auth), and it speaks HTTPS to the worker.
- Every Kafka connection is the secured stack's (the `mirrorbook` principal on SASL_SSL); a scratch alias
  resolves to cluster A's.
Airflow is started first and boots while the scratch flows and the workload are prepared.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from mirrorbook.audit import AuditStore
from mirrorbook.connect import ConnectClient
from mirrorbook.connect.wait import wait_for
from mirrorbook.devstack.stack import DevStack, StackState
from mirrorbook.devstack.workload import GroupSpec, load, produce
from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.topology import FailoverOnAlert, FlowSpec, Topology
from tests.conftest import ensure_replicating, serving_pems
from tests.e2e import airflow_server
from tests.faultproxy import FaultProxy
from tests.install import Installed
from tests.helpers import wait_mirrored

RUNBOOK_DAGS = ["mm2_failover", "mm2_failback", "mm2_pause_resume", "mm2_offsets", "dr_drill"]
GROUP_POSITIONS = ["end", "end-7", "begin", "37"]
# Every flow's RTO objective: a failover misses it waiting at a gate (test_approval_api holds a group active on A).
E2E_RTO_SLO_S = 20
# A secret the ops flow carries in its source connector's config (an SSL key password the admin client ignores
# without a keystore), so the tests can prove the API and the page never show it; its Kafka connection carries
# the stack's real SCRAM password, which the secret scan looks for everywhere (test_secrets_nowhere.py).
SECRET = f"e2e-s3cret-{uuid.uuid4().hex[:8]}"
SECRET_CONNECTOR_KEY = "source.admin.ssl.key.password"
METRICS_TOKEN = f"e2e-scrape-{uuid.uuid4().hex}"  # the API server's MIRRORBOOK_METRICS_TOKEN


@dataclass
class Scratch:
    """A flow of the e2e module's own: alias `alias` for cluster A, replicating only `topic` to B."""

    alias: str
    topic: str
    flow: FlowSpec
    groups: list[str] = field(default_factory=list)

    @property
    def remote(self) -> str:
        return f"{self.alias}.{self.topic}"

    @property
    def path(self) -> str:
        return f"/{self.alias}/B"


@dataclass
class E2E:
    airflow: airflow_server.AirflowServer
    proxy: FaultProxy
    audit: AuditStore
    topology: Topology
    stack: StackState
    failover: Scratch
    ops: Scratch
    _tokens: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.airflow.url

    def password(self, user: str) -> str:
        return self.airflow.passwords()[user]

    def token(self, user: str = "admin") -> str:
        if user not in self._tokens:
            self._tokens[user] = self.airflow.token(user)
        return self._tokens[user]

    def client(self, user: str | None = "admin") -> httpx.Client:
        """An HTTP client for the API server, authenticated as `user` (None: anonymous)."""
        headers = {"Authorization": f"Bearer {self.token(user)}"} if user else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=120)


def new_alias() -> str:
    return "E" + uuid.uuid4().hex[:6].upper()


def _scratch(devstack: DevStack, admin_a: KafkaAdmin, alias: str, tag: str) -> Scratch:
    topic = f"e2e-{tag}-{uuid.uuid4().hex[:6]}"
    admin_a.create_topics({topic: 2})
    topo = devstack.alias_flow(alias, topics=re.escape(topic))
    return Scratch(alias=alias, topic=topic, flow=topo.flow(f"{alias}->B"))


def _add_connector_secret(stack: StackState, scratch: Scratch) -> None:
    name = scratch.flow.connector("source")
    with ConnectClient(stack.connect_settings("B")) as client:
        client.put_config(name, {**client.get_config(name), SECRET_CONNECTOR_KEY: SECRET})
        wait_for(client, name, "RUNNING", timeout_s=60, min_tasks=1)


def _topology(stack: StackState, scratches: list[Scratch], alerting: Scratch) -> Topology:
    """The devstack's topology plus the scratch flows (their aliases resolve to cluster A's address);
    mm2_failover_on_alert watches `alerting`'s flow."""
    base = stack.topology()
    clusters = dict(base.clusters)
    for s in scratches:
        clusters[s.alias] = base.clusters["A"].model_copy(
            update={"connection_id": f"mirrorbook_kafka_{s.alias.lower()}"})
    # One RTO objective for every flow, so a failover run carries one deadline, passed before any test clears a
    # task: Airflow 3.3.2 cannot clear a task of a run with a queued-at deadline still ahead (apache/airflow#70368).
    flows = [f.model_copy(update={"rto_slo_s": E2E_RTO_SLO_S}) for f in [*base.flows, *(s.flow for s in scratches)]]
    return Topology(clusters=clusters, connect_clusters=base.connect_clusters, flows=flows, groups=base.groups,
                    failover_on_alert=FailoverOnAlert(enabled=True, flows=re.escape(alerting.flow.name),
                                                      consecutive_checks=2))


def _write(path: Path, topology: Topology) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(topology.to_yaml())
    tmp.replace(path)  # Airflow's processes read it at any time: never half-written


def _connections(devstack: DevStack, proxy: FaultProxy, aliases: list[str], spark_url: str) -> dict[str, str]:
    """The secured stack's connections; Connect B's through the proxy (HTTPS, the same user); each scratch
    alias's Kafka connection cluster A's; the session's Spark Connect server for the proofs."""
    conns = json.loads(devstack.connections_path.read_text())
    host, port = spark_url.removeprefix("sc://").rstrip("/").split(":")
    conns["spark_connect_default"] = {"conn_type": "spark_connect", "host": host, "port": int(port)}
    conns["mirrorbook_connect_b"] = {**conns["mirrorbook_connect_b"], "port": int(proxy.url.rsplit(":", 1)[1])}
    for alias in aliases:
        conns[f"mirrorbook_kafka_{alias.lower()}"] = conns["mirrorbook_kafka_a"]
    return {f"AIRFLOW_CONN_{cid.upper()}": json.dumps(spec) for cid, spec in conns.items()}


def _warm_spark_connect(stack: StackState, scratch: Scratch, url: str, home: Path) -> None:
    """One record proof of a few records over SASL_SSL on the session's Spark Connect server while Airflow boots,
    as a server that has run proofs before is: a cold server's first Kafka read (the Kafka source's classes, the
    JIT, TLS and SCRAM) took 112 s on a loaded two-core machine, close to the warm_proof task's 120 s deadline.
    The dags tests run before e2e in the suite have paid it already; this pays it when e2e runs alone."""
    from mirrorbook.kafka.config import java_client_options
    from mirrorbook.parity import connect, submit, write_record_snapshot
    from mirrorbook.parity.collector import RecordRange

    a, b = stack.kafka_config("A", "mirrorbook"), stack.kafka_config("B", "mirrorbook")
    snap = write_record_snapshot(home / "warm" / "snapshot", [RecordRange(
        source_topic=scratch.topic, source_partition=0, target_topic=scratch.remote, target_partition=0,
        source_start=0, source_end=5, target_start=0, target_end=5)])
    connect.run(submit.record_parity_job(a["bootstrap.servers"], b["bootstrap.servers"], home / "warm" / "out",
                                         snapshot=snap, source_options=java_client_options(a),
                                         target_options=java_client_options(b), source_rdkafka=a,
                                         target_rdkafka=b), url)


@pytest.fixture(scope="session")
def e2e(secure_devstack: DevStack, spark_connect: Any, installed: Installed,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2E]:
    # The session's Spark Connect server is up first, so its connection (spark_connect_default) is among the
    # standalone's: proofs of e2e runs go there, as `make demo`'s do — reading the secured clusters with the
    # session's read options.
    home = tmp_path_factory.mktemp("airflow-e2e")
    devstack = secure_devstack
    ensure_replicating(devstack)  # the failover module before it leaves A->B stopped
    stack = devstack.require()
    topology_path = home / "topology.yaml"
    _write(topology_path, stack.topology())
    audit_url = f"sqlite:///{home}/mirrorbook-audit.db"
    a = stack.kafka_config("A")  # the tests' own clients: the super user's
    admin_a, admin_b = KafkaAdmin(a), KafkaAdmin(stack.kafka_config("B"))
    scratches: list[Scratch] = []
    fo_alias, ops_alias = new_alias(), new_alias()
    ca = str(stack.security.ca) if stack.security else True
    with FaultProxy(stack.workers["B"].url, verify=ca, tls=serving_pems(devstack, home)) as proxy:
        # The health check runs when a test triggers it (tests/e2e/test_flow_events_api.py), never on its own.
        env = {"MIRRORBOOK_TOPOLOGY": str(topology_path), "MIRRORBOOK_AUDIT_URL": audit_url,
               "MIRRORBOOK_HEALTH_SCHEDULE": "none", "MIRRORBOOK_RPO_SAMPLER_SCHEDULE": "none",
               "MIRRORBOOK_ARTIFACTS_DIR": str(home / "artifacts"), "MIRRORBOOK_METRICS_TOKEN": METRICS_TOKEN,
               **_connections(devstack, proxy, [fo_alias, ops_alias], spark_connect.url)}
        server = airflow_server.start(home / "airflow", env, installed=installed)
        try:
            failover = _scratch(devstack, admin_a, fo_alias, "fo")
            scratches.append(failover)
            ops = _scratch(devstack, admin_a, ops_alias, "ops")
            scratches.append(ops)
            _add_connector_secret(stack, ops)
            tag = failover.topic
            failover.groups = [f"{tag}-g{i}" for i in range(len(GROUP_POSITIONS))]
            load(a, [failover.topic], 2, 60,
                 [GroupSpec(name=g, position=p) for g, p in zip(failover.groups, GROUP_POSITIONS)])
            produce(a, [ops.topic], 5)
            for s in scratches:
                wait_mirrored(admin_a, admin_b, s.topic, s.remote)
            topology = _topology(stack, scratches, alerting=failover)
            _write(topology_path, topology)
            _warm_spark_connect(stack, ops, spark_connect.url, home)
            airflow_server.wait_ready(server, RUNBOOK_DAGS)
            yield E2E(airflow=server, proxy=proxy, audit=AuditStore(audit_url), topology=topology, stack=stack,
                      failover=failover, ops=ops)
        finally:
            airflow_server.stop(server)
            for s in scratches:
                devstack.remove_flow(s.flow)
