"""The devstack lifecycle: up (reconcile to running), status, down, stop/start one cluster.

`up` is a reconciler, not a script: it reads `stack.json`, starts only what is not alive, PUTs only
connector configs that differ, then waits for readiness. On a running stack it does nothing.
Processes are tracked by pid and start time, so `down` never signals anything it did not start.
"""

from __future__ import annotations

import base64
import json
import shutil
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from pydantic import BaseModel, Field

from mirrorbook.connect import ConnectClient, ConnectError, ConnectSettings
from mirrorbook.connect.errors import ConnectorNotFound
from mirrorbook.connect.retry import NO_RETRY
from mirrorbook.connect.wait import WaitTimeout, wait_for
from mirrorbook.devstack import artifacts, config, ports, spark
from mirrorbook.devstack import security as devsec
from mirrorbook.devstack.errors import DevstackError, ProcessDied, ReadinessTimeout, StackNotRunning
from mirrorbook.devstack.paths import default_run_dir
from mirrorbook.devstack.processes import ProcessRecord, died_error, run_java, start_java
from mirrorbook.devstack.spark import SparkConnectState
from mirrorbook.devstack.tools import find_java
from mirrorbook.maven import versions
from mirrorbook.redaction import get_logger
from mirrorbook.topology import ConnectClusterSpec, FlowSpec, KafkaClusterSpec, Topology

log = get_logger(__name__)

BROKER_MAIN = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"
CONNECT_MAIN = "org.apache.kafka.connect.cli.ConnectDistributed"
CANARY_TOPIC = "mirrorbook-canary"


class NodeState(BaseModel):
    """One Kafka process of a cluster: a broker that is also a KRaft controller (it has a controller port) or a
    broker only."""
    alias: str  # its cluster's
    node_id: int
    label: str  # "A" on a single-broker cluster, "A-2" for node 2 of several: names its process, files and data
    broker_port: int
    controller_port: int | None = None
    process: ProcessRecord | None = None

    @property
    def name(self) -> str:
        return f"broker-{self.label}"

    @property
    def bootstrap(self) -> str:
        return f"localhost:{self.broker_port}"


class ClusterState(BaseModel):
    alias: str
    cluster_id: str
    nodes: list[NodeState]

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    @property
    def voters(self) -> str:
        """`controller.quorum.voters`: a static quorum, known to every node from its first start."""
        return ",".join(f"{n.node_id}@localhost:{n.controller_port}" for n in self.nodes if n.controller_port)

    def node(self, node_id: int) -> NodeState:
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise DevstackError(f"Cluster {self.alias} has no broker {node_id}; its brokers are "
                            f"{', '.join(str(n.node_id) for n in self.nodes)}")


class WorkerState(BaseModel):
    alias: str  # the Kafka cluster the worker is bootstrapped on (= the target of its flows)
    rest_port: int
    flows: list[str]
    process: ProcessRecord | None = None
    https: bool = False  # a secured stack's: HTTPS only, behind basic auth

    @property
    def name(self) -> str:
        return f"connect-{self.alias}"

    @property
    def url(self) -> str:
        return f"{'https' if self.https else 'http'}://localhost:{self.rest_port}"


class StackState(BaseModel):
    kafka_version: str
    run_dir: str
    settings: config.StackSettings
    brokers: dict[str, ClusterState]  # each cluster's brokers, by alias
    workers: dict[str, WorkerState] = Field(default_factory=dict)
    spare_ports: list[int] = Field(default_factory=list)
    spark: SparkConnectState | None = None

    def flows(self) -> list[FlowSpec]:
        a, b = self.settings.aliases
        mm2 = self.settings.mm2
        pairs = [(a, b)] + ([(b, a)] if self.settings.reverse else [])
        return [FlowSpec(source=s, target=t, connect_cluster=t, replication_policy=mm2.replication_policy,
                         separator=mm2.separator) for s, t in pairs]

    def bootstraps(self) -> dict[str, str]:
        return {alias: b.bootstrap for alias, b in self.brokers.items()}

    @property
    def security(self) -> devsec.Material | None:
        """A secured stack's certificates and secrets (None: plaintext)."""
        return devsec.Material(Path(self.run_dir)) if self.settings.secure else None

    def kafka_config(self, alias: str, user: str = devsec.SUPER_USER) -> str | dict[str, Any]:
        """How a client reaches cluster `alias`: its bootstrap servers, or on a secured stack a SASL_SSL config as
        `user` (the devstack's own calls are the super user's)."""
        return self.client_config(self.brokers[alias].bootstrap, user)

    def client_config(self, bootstrap: str, user: str = devsec.SUPER_USER) -> str | dict[str, Any]:
        sec = self.security
        return sec.client_config(bootstrap, user) if sec else bootstrap

    def connect_settings(self, alias: str) -> ConnectSettings:
        """How to reach the Connect worker on `alias` (with its CA and basic-auth user on a secured stack)."""
        worker, sec = self.workers[alias], self.security
        return sec.connect_settings(worker.url, alias) if sec else ConnectSettings(url=worker.url, name=alias)

    def protocols(self) -> dict[str, str]:
        """What `status` says of the stack's security: protocols and files, never a secret."""
        sec = self.security
        if sec is None:
            return {"kafka": "PLAINTEXT", "connect": "http"}
        return {"kafka": f"{devsec.PROTOCOL} ({devsec.MECHANISM}, StandardAuthorizer ACLs)",
                "controller": "SSL (client certificates)", "connect": "https + basic auth",
                "ca": str(sec.ca), "principals": ", ".join(devsec.USERS)}

    def topology(self, addresses: bool = True) -> Topology:
        """The stack's topology; without `addresses` it names connection ids only (a secured stack's file: its
        clients need the connections' credentials anyway)."""
        return Topology(
            clusters={a: KafkaClusterSpec(connection_id=f"mirrorbook_kafka_{a.lower()}",
                                          bootstrap_servers=b.bootstrap if addresses else None)
                      for a, b in self.brokers.items()},
            connect_clusters={a: ConnectClusterSpec(connection_id=f"mirrorbook_connect_{a.lower()}",
                                                    url=w.url if addresses else None)
                              for a, w in self.workers.items()},
            flows=self.flows(),
            groups=self.settings.mm2.groups,
        )

    def processes(self) -> dict[str, ProcessRecord]:
        out = {n.name: n.process for c in self.brokers.values() for n in c.nodes if n.process}
        out.update({w.name: w.process for w in self.workers.values() if w.process})
        out.update(self.spark.processes() if self.spark else {})
        return out

    def all_ports(self) -> set[int]:
        return ({p for c in self.brokers.values() for n in c.nodes for p in (n.broker_port, n.controller_port) if p}
                | set(self.spare_ports) | (self.spark.ports() if self.spark else set()))


def planned_nodes(settings: config.StackSettings) -> Iterator[tuple[str, int, str, bool]]:
    """Each node a new stack has, in `--port-base` order: (cluster alias, node id, label, is a controller)."""
    for alias in settings.aliases:
        count = settings.count(alias)
        for node_id in range(1, count + 1):
            yield alias, node_id, alias if count == 1 else f"{alias}-{node_id}", node_id <= settings.voters(alias)


def port_layout(settings: config.StackSettings) -> list[str]:
    """What each of a new stack's ports is for, in `--port-base` order: each cluster's brokers (a controller's
    port after its broker's), then the Connect workers on B and on A. One broker a cluster: 6 ports."""
    out = []
    for _, _, label, controller in planned_nodes(settings):
        out += [f"broker {label}"] + ([f"controller {label}"] if controller else [])
    return out + [f"Connect worker {settings.aliases[1]}", f"Connect worker {settings.aliases[0]}"]


def merged(settings: config.StackSettings, overrides: dict[str, Any]) -> config.StackSettings:
    """`settings` with the options given explicitly (`mm2` merged key by key)."""
    data = settings.model_dump()
    mm2 = {**data["mm2"], **overrides.get("mm2", {})}
    data.update({k: v for k, v in overrides.items() if k != "mm2"}, mm2=mm2)
    return config.StackSettings.model_validate(data)


def spark_resize_refusal(run_dir: Path, running: int, asked: int) -> str:
    """Why `up` refuses to change the cluster of a running Spark Connect server: its application holds the executors
    it was given at its start, so a cluster resized under it would keep running the proofs on the old one."""
    def said(n: int) -> str:
        return f"a cluster of {n} Spark worker{'s' * (n != 1)}" if n else "local[*]"
    return (f"The stack in {run_dir} runs its Spark Connect server on {said(running)}, not {said(asked)}: "
            "a running server's application keeps the executors it started with")


def stop_together(records: list[ProcessRecord], kill: bool = False) -> None:
    """Stop processes at once, not one after the other: the last voter of a quorum stopped alone would wait for
    a quorum that is gone before its controlled shutdown gave up."""
    live = [r for r in records if r.alive()]
    if live:
        with ThreadPoolExecutor(len(live)) as pool:
            list(pool.map(lambda r: r.stop(kill=kill), live))


def new_cluster_id() -> str:
    """A Kafka Uuid string (url-safe base64 of 16 random bytes); Kafka never issues one starting with '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


class DevStack:
    def __init__(self, run_dir: str | Path | None = None) -> None:
        self.run_dir = Path(run_dir) if run_dir else default_run_dir()

    # -- files --------------------------------------------------------------------------------------
    @property
    def state_path(self) -> Path:
        return self.run_dir / "stack.json"

    @property
    def topology_path(self) -> Path:
        return self.run_dir / "topology.yaml"

    @property
    def connections_path(self) -> Path:
        return self.run_dir / "airflow-connections.json"

    def load(self) -> StackState | None:
        if not self.state_path.is_file():
            return None
        return StackState.model_validate_json(self.state_path.read_text())

    def require(self) -> StackState:
        state = self.load()
        if state is None:
            raise StackNotRunning(f"No devstack in {self.run_dir} (no stack.json).",
                                  f"mirrorbook devstack up --run-dir {self.run_dir}")
        return state

    def _save(self, state: StackState) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(state.model_dump_json(indent=2))
        tmp.replace(self.state_path)

    def _write_topology(self, state: StackState) -> None:
        sec = state.security
        topo = state.topology()
        self.topology_path.write_text(state.topology(addresses=sec is None).to_yaml())
        conns: dict[str, Any] = {}
        for alias, spec in topo.clusters.items():
            extra = state.kafka_config(alias, "mirrorbook")
            conns[spec.connection_id] = {"conn_type": "kafka", "extra": extra if isinstance(extra, dict)
                                         else {"bootstrap.servers": extra}}
        for alias, connect in topo.connect_clusters.items():
            port = state.workers[alias].rest_port
            conns[connect.connection_id] = sec.connect_connection(port) if sec else {
                "conn_type": "kafka_connect", "host": "localhost", "port": port, "schema": "http"}
        if state.spark:
            conns[spark.CONN_ID] = state.spark.connection()
        # A secured stack's connections carry its passwords: readable by their owner only.
        devsec.write_private(self.connections_path, json.dumps(conns, indent=2).encode())

    # -- up -----------------------------------------------------------------------------------------
    def up(self, settings: config.StackSettings | None = None, *, port_base: int | None = None,
           overrides: dict[str, Any] | None = None, timeout_s: float = 180.0) -> dict[str, Any]:
        """Reconcile to a running stack. Returns what was started (empty on a running stack).

        `settings` replaces the stored settings; `overrides` (only options given explicitly) are merged
        into them. Ports, cluster ids and data of an existing stack are kept.
        """
        java = find_java()
        state = self.load()
        fresh = state is None
        made = None if state is None else state.settings  # what an existing stack was made with
        wanted = settings or made or config.StackSettings()
        if overrides:
            wanted = merged(wanted, overrides)
        # A new stack's ports and quorum follow its settings (how many brokers); an existing one keeps its own.
        state = self._allocate(wanted, port_base) if state is None else state.model_copy(update={"settings": wanted})
        if made is not None:
            if state.settings.secure != made.secure:
                was = "secured" if made.secure else "plaintext"
                raise DevstackError(f"The stack in {self.run_dir} was made {was}: its listeners and data cannot "
                                    "change kind", f"mirrorbook devstack down --purge --run-dir {self.run_dir}, "
                                    "then up again")
            counts = lambda s: {a: s.count(a) for a in s.aliases}  # noqa: E731
            if counts(state.settings) != counts(made):
                shown = ", ".join(f"{a}: {n}" for a, n in counts(made).items())
                raise DevstackError(f"The stack in {self.run_dir} was made with brokers {shown}: its quorums, "
                                    "ports and data are made for those counts",
                                    f"mirrorbook devstack down --purge --run-dir {self.run_dir}, then up again")
        libs = artifacts.kafka_libs()
        cp = f"{libs}/*"
        started: list[str] = []  # filled as processes start, so a failure can stop exactly those
        try:
            self._ensure_workers_declared(state)
            self._ensure_spark_declared(state)
            if state.security:
                state.security.ensure()
            self._save(state)
            # Spark needs nothing of Kafka to start: launched first, awaited last, its start overlaps the brokers'
            # and workers'. A server on the stack's cluster starts once the workers are up, after Kafka's.
            self._launch_spark_cluster(java, state, started)
            if state.spark and state.spark.master is None:
                self._launch_spark(java, state, started, timeout_s)
            if fresh:
                self._format(java, cp, state)
            self._start_brokers(java, cp, state, timeout_s, started)
            if state.security:
                for alias in state.brokers:
                    state.security.ensure_acls(state.brokers[alias].bootstrap)
            self._seed_sources(state)
            self._start_workers(java, cp, state, timeout_s, started)
            self._launch_spark(java, state, started, timeout_s)
            changed = self._ensure_connectors(state)
            self._wait_connectors(state, timeout_s)
            if "spark-connect" in started:
                assert state.spark
                spark.wait_ready(state.spark, timeout_s)
        except Exception:
            for name, rec in state.processes().items():
                if name in started:
                    rec.stop()
            raise
        self._write_topology(state)
        self._save(state)
        return {"started": started, "connectors_configured": changed, "already_running": not started and not changed}

    def _allocate(self, settings: config.StackSettings, port_base: int | None) -> StackState:
        layout = port_layout(settings)
        if port_base is not None:
            wanted = list(range(port_base, port_base + len(layout)))
            for p, what in zip(wanted, layout):
                ports.require_free(p, what)
        else:
            wanted = ports.pick_free(len(layout))
        free = iter(wanted)
        clusters = {alias: ClusterState(alias=alias, cluster_id=new_cluster_id(), nodes=[])
                    for alias in settings.aliases}
        for alias, node_id, label, controller in planned_nodes(settings):
            broker_port = next(free)  # a controller's port after its broker's, as port_layout names them
            clusters[alias].nodes.append(NodeState(alias=alias, node_id=node_id, label=label, broker_port=broker_port,
                                                   controller_port=next(free) if controller else None))
        return StackState(kafka_version=versions.KAFKA_VERSION, run_dir=str(self.run_dir), settings=settings,
                          brokers=clusters, spare_ports=list(free))

    def _ensure_workers_declared(self, state: StackState) -> None:
        for flow in state.flows():
            worker = state.workers.get(flow.connect_cluster)
            if worker is None:
                port = state.spare_ports[0] if flow.connect_cluster == state.settings.aliases[1] else \
                    state.spare_ports[1]
                worker = state.workers[flow.connect_cluster] = WorkerState(alias=flow.connect_cluster, rest_port=port,
                                                                           flows=[], https=state.settings.secure)
            if flow.name not in worker.flows:
                worker.flows.append(flow.name)

    def _ensure_spark_declared(self, state: StackState) -> None:
        """The server (and its cluster) the settings ask for. A stopped server's cluster is re-declared to the
        asked size (its own port kept: the written connection stays valid); a running one's is refused. Settings
        that ask for no server (a test session's, given whole) leave a declared one as it is."""
        workers = state.settings.spark_workers
        sc = state.spark
        if not state.settings.spark or (sc is not None and len(sc.workers) == workers):
            return
        if sc is not None and any(p.alive() for p in sc.processes().values()):
            raise DevstackError(spark_resize_refusal(self.run_dir, len(sc.workers), workers),
                                f"mirrorbook devstack down --run-dir {self.run_dir}, then up --spark-workers "
                                f"{workers} (Kafka's data and ports and the server's URL are kept)")
        taken = state.all_ports() - (sc.ports() if sc else set())
        needed = (0 if sc else 1) + spark.cluster_ports(workers)
        free = iter(ports.pick_free(needed, avoid=taken) if needed else [])
        state.spark = spark.cluster_state(sc.port if sc else next(free), workers, free)

    def _launch_spark_cluster(self, java: str, state: StackState, started: list[str]) -> None:
        """The daemons of the standalone cluster the server runs on, if it runs on one: those not up."""
        sc = state.spark
        for node in sc.nodes() if sc else []:
            if node.process and node.process.alive():
                continue
            assert sc is not None
            if node is sc.master and sc.process and sc.process.alive():
                # An application never registers again with a master that was restarted (only a standalone HA
                # recovery would tell it where the master is): the server would wait for executors forever.
                sc.process.stop()
            node.process = spark.launch_node(java, sc, node, self.run_dir, self._logs_dir,
                                             executor_memory_mb=state.settings.spark_executor_memory_mb)
            started.append(node.name)
            self._save(state)

    def _launch_spark(self, java: str, state: StackState, started: list[str], timeout_s: float) -> None:
        """The server, if it is not up (on a cluster, once its master answers: an application registering earlier
        is retried only 20 s later; the workers register meanwhile, and `wait_ready` waits for their executors)."""
        sc = state.spark
        if sc is None or (sc.process and sc.process.alive()):
            return
        if sc.master is not None:
            spark.wait_cluster(sc, timeout_s, workers=False)
        sc.process = spark.launch(java, sc, self.run_dir, self._logs_dir,
                                  driver_memory_mb=state.settings.spark_driver_memory_mb,
                                  executor_memory_mb=state.settings.spark_executor_memory_mb)
        started.append("spark-connect")
        self._save(state)

    def _broker_dir(self, node: NodeState) -> Path:
        return self.run_dir / "data" / node.label

    @property
    def _logs_dir(self) -> Path:
        return self.run_dir / "logs"

    def _log(self, name: str) -> Path:
        return self._logs_dir / f"{name}.log"

    def _log4j(self) -> Path:
        path = self.run_dir / "log4j2.yaml"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(config.LOG4J2)
        return path

    def _broker_config(self, node: NodeState, state: StackState) -> Path:
        path = self.run_dir / "config" / f"{node.name}.properties"
        path.parent.mkdir(parents=True, exist_ok=True)
        props = config.broker_properties(node.broker_port, node.controller_port, self._broker_dir(node),
                                         node_id=node.node_id, voters=state.brokers[node.alias].voters,
                                         replication_factor=state.settings.replication_factor(node.alias))
        if state.security:
            props.update(state.security.broker_properties(node.broker_port, node.controller_port))
        devsec.write_private(path, config.render_properties(props).encode())  # a secured broker's has secrets
        return path

    def _format(self, java: str, cp: str, state: StackState) -> None:
        def fmt(node: NodeState) -> None:
            props = self._broker_config(node, state)
            if (self._broker_dir(node) / "meta.properties").is_file():
                return
            # A secured stack's SCRAM users are bootstrap records of the format; their passwords go to the JVM
            # in a 0600 argument file, never on its command line. The quorum is static (every node's
            # controller.quorum.voters): the format needs no --standalone / --initial-controllers.
            secret_args = state.security.scram_format_args() if state.security else []
            run_java(java, ["-Xmx256m", "-XX:TieredStopAtLevel=1", f"-Dlog4j2.configurationFile={self._log4j()}"],
                     cp, STORAGE_TOOL, ["format", "-t", state.brokers[node.alias].cluster_id, "-c", str(props)],
                     self._log(f"format-{node.label}"), f"formatting the storage of broker {node.label}",
                     secret_args=secret_args, argfile=self.run_dir / "config" / f"format-{node.label}.args")
        nodes = [n for c in state.brokers.values() for n in c.nodes]
        with ThreadPoolExecutor(min(len(nodes), 4)) as pool:
            list(pool.map(fmt, nodes))

    def _start_each(self, java: str, cp: str, state: StackState, timeout_s: float, started: list[str],
                    only: str | None, members: list[Any], label: str,
                    needs: Callable[[Any], list[tuple[int, str]]], heap_mb: int, main: str,
                    props: Callable[[Any], Path], wait: Callable[[Any, float], None],
                    extra_opts: Sequence[str] = ()) -> None:
        """Start the members (brokers or workers) that are not running — each after checking its ports, and
        recorded at once (so `down` finds it even if a later one fails) — then wait until each one started
        answers."""
        for m in members:
            if (only and m.alias != only) or (m.process and m.process.alive()):
                continue
            for port, what in needs(m):
                ports.require_free(port, what)
            opts = config.jvm_opts(heap_mb, self._log4j(), [*extra_opts, *state.settings.extra_jvm_opts])
            m.process = start_java(java, opts, cp, main, [str(props(m))], self._log(m.name), f"{label} {m.alias}")
            started.append(m.name)
            self._save(state)
        for m in members:
            if m.name in started:
                wait(m, timeout_s)

    def _start_brokers(self, java: str, cp: str, state: StackState, timeout_s: float, started: list[str],
                       only: str | None = None, node: int | None = None) -> None:
        """Start the brokers not running (of cluster `only`, or only its broker `node`), every one before any is
        awaited (a quorum of three answers once two of them run); then wait until each cluster that had one
        started lists all its brokers (a topic of three replicas can be made only then)."""
        nodes = [n for c in state.brokers.values() for n in c.nodes if node is None or n.node_id == node]
        self._start_each(java, cp, state, timeout_s, started, only, nodes, "broker",
                         lambda n: [(n.broker_port, f"broker {n.label}")]
                         + ([(n.controller_port, f"controller {n.label}")] if n.controller_port else []),
                         state.settings.broker_heap_mb, BROKER_MAIN, lambda n: self._broker_config(n, state),
                         lambda n, t: self._wait_broker(n, t, state))
        for cluster in state.brokers.values():
            if len(cluster.nodes) > 1 and any(n.name in started for n in cluster.nodes):
                self._wait_all_brokers(cluster, timeout_s, state)

    def _wait_broker(self, node: NodeState, timeout_s: float, state: StackState) -> None:
        from mirrorbook.kafka.admin import KafkaAdmin

        admin = KafkaAdmin(state.client_config(node.bootstrap))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert node.process
            if not node.process.alive():
                raise died_error(node.process, f"broker {node.label}")
            if ports.wait_port_open(node.broker_port) and admin.ping(timeout_s=2.0):
                return
            time.sleep(0.3)
        raise ReadinessTimeout(f"Broker {node.label} did not answer on {node.bootstrap} within {timeout_s:.0f}s",
                               f"read {node.process.log if node.process else 'its log'}")

    @staticmethod
    def _wait_all_brokers(cluster: ClusterState, timeout_s: float, state: StackState) -> None:
        from mirrorbook.kafka.admin import KafkaAdmin

        admin = KafkaAdmin(state.kafka_config(cluster.alias))
        wanted = {n.node_id for n in cluster.nodes}
        deadline = time.monotonic() + timeout_s
        while (listed := admin.broker_ids()) != wanted:
            if time.monotonic() > deadline:
                raise ReadinessTimeout(f"Cluster {cluster.alias} lists brokers {sorted(listed)} of {sorted(wanted)} "
                                       f"after {timeout_s:.0f}s", "read the missing brokers' logs in "
                                       f"{cluster.nodes[0].process.log if cluster.nodes[0].process else 'logs/'}")
            time.sleep(0.3)

    @staticmethod
    def _seed_sources(state: StackState) -> None:
        """MirrorSourceConnector runs no task while its source has no topic: give every source a canary."""
        from mirrorbook.kafka.admin import KafkaAdmin

        for flow in state.flows():
            KafkaAdmin(state.kafka_config(flow.source)).create_topics({CANARY_TOPIC: 1})

    def _worker_config(self, worker: WorkerState, state: StackState) -> Path:
        path = self.run_dir / "config" / f"connect-{worker.alias}.properties"
        path.parent.mkdir(parents=True, exist_ok=True)
        props = config.worker_properties(worker.alias, state.brokers[worker.alias].bootstrap, worker.rest_port,
                                         state.settings)
        if state.security:
            props.update(state.security.worker_properties(worker.rest_port))
        devsec.write_private(path, config.render_properties(props).encode())  # a secured worker's has secrets
        return path

    def _start_workers(self, java: str, cp: str, state: StackState, timeout_s: float, started: list[str],
                       only: str | None = None) -> None:
        self._start_each(java, cp, state, timeout_s, started, only, list(state.workers.values()),
                         "Connect worker", lambda w: [(w.rest_port, f"Connect worker {w.alias}")],
                         state.settings.connect_heap_mb, CONNECT_MAIN, lambda w: self._worker_config(w, state),
                         lambda w, t: self._wait_worker(w, t, state),
                         state.security.worker_jvm_opts() if state.security else [])

    def _wait_worker(self, worker: WorkerState, timeout_s: float, state: StackState) -> None:
        deadline = time.monotonic() + timeout_s
        with ConnectClient(state.connect_settings(worker.alias), retry=NO_RETRY) as client:
            while time.monotonic() < deadline:
                assert worker.process
                if not worker.process.alive():
                    raise died_error(worker.process, f"Connect worker {worker.alias}")
                try:
                    client.root()
                    client.list()  # answers only once the worker has joined its group and read its config topic
                    return
                except ConnectError:
                    time.sleep(0.5)
        raise ReadinessTimeout(f"Connect worker {worker.alias} did not answer on {worker.url} within {timeout_s:.0f}s",
                               f"read {worker.process.log if worker.process else 'its log'}")

    def _ensure_connectors(self, state: StackState) -> list[str]:
        changed = []
        bootstraps = state.bootstraps()
        for flow in state.flows():
            with ConnectClient(state.connect_settings(flow.connect_cluster)) as client:
                for name, cfg in self._connector_configs(state, flow, bootstraps, state.settings.mm2).items():
                    try:
                        current = client.get_config(name)
                    except ConnectorNotFound:
                        current = None
                    if current is not None and all(current.get(k) == v for k, v in cfg.items()):
                        continue
                    client.put_config(name, cfg)
                    changed.append(name)
        return changed

    def _wait_connectors(self, state: StackState, timeout_s: float, only: str | None = None) -> None:
        """Every connector RUNNING; source and heartbeat with a running task (checkpoint may have none yet)."""
        deadline = time.monotonic() + timeout_s
        for flow in state.flows():
            if only and flow.connect_cluster != only:
                continue
            worker = state.workers[flow.connect_cluster]
            with ConnectClient(state.connect_settings(flow.connect_cluster), retry=NO_RETRY) as client:
                for role, name in flow.connector_names.items():
                    try:
                        wait_for(client, name, "RUNNING", timeout_s=max(1.0, deadline - time.monotonic()),
                                 min_tasks=0 if role == "checkpoint" else 1, missing_ok=True)
                    except WaitTimeout as exc:
                        if worker.process and not worker.process.alive():
                            raise died_error(worker.process, f"Connect worker {worker.alias}") from exc
                        raise ReadinessTimeout(str(exc), f"read {worker.process.log if worker.process else 'its log'}")

    @staticmethod
    def _connector_configs(state: StackState, flow: FlowSpec, bootstraps: dict[str, str],
                           mm2: config.Mm2Settings) -> dict[str, dict[str, str]]:
        replication = {a: state.settings.replication_factor(a) for a in state.brokers}
        if flow.source not in replication:  # an alias of another cluster (alias_flow): the cluster its bootstrap is
            replication[flow.source] = next((replication[a] for a, c in state.brokers.items()
                                             if c.bootstrap == bootstraps[flow.source]), 1)
        configs = config.connector_configs(flow, bootstraps, mm2, replication)
        if state.security:
            extra = state.security.connector_properties()
            configs = {name: {**cfg, **extra} for name, cfg in configs.items()}
        return configs

    # -- extra flows over the same clusters ---------------------------------------------------------
    def alias_flow(self, alias: str, *, of: str = "A", target: str = "B", topics: str = ".*",
                   mm2: config.Mm2Settings | None = None, timeout_s: float = 60.0) -> Topology:
        """Start a flow `<alias>-><target>` whose source is cluster `of` under another alias.

        Lets tests and benchmarks have many independent flows (and stop/alter one freely) on one
        stack. Its offset-syncs live on the target, so they never mix with the real flow's.
        Returns the stack's topology with the extra cluster alias and flow added.
        """
        state = self.require()
        topo = state.topology()
        flow = FlowSpec(source=alias, target=target, connect_cluster=target,
                        replication_policy=state.settings.mm2.replication_policy,
                        separator=state.settings.mm2.separator)
        clusters = {**topo.clusters, alias: KafkaClusterSpec(connection_id=f"mirrorbook_kafka_{alias.lower()}",
                                                             bootstrap_servers=state.brokers[of].bootstrap)}
        settings = (mm2 or state.settings.mm2).model_copy(update={"topics": topics})
        configs = self._connector_configs(state, flow, {**state.bootstraps(), alias: state.brokers[of].bootstrap},
                                          settings)
        with ConnectClient(state.connect_settings(target)) as client:
            for name, cfg in configs.items():
                client.put_config(name, {**cfg, "offset-syncs.topic.location": "target"})
            for role, name in flow.connector_names.items():
                wait_for(client, name, "RUNNING", timeout_s=timeout_s, missing_ok=True,
                         min_tasks=1 if role == "heartbeat" else 0)
        return Topology(clusters=clusters, connect_clusters=topo.connect_clusters, flows=[*topo.flows, flow],
                        groups=topo.groups)

    def remove_flow(self, flow: FlowSpec) -> None:
        state = self.require()
        with ConnectClient(state.connect_settings(flow.connect_cluster)) as client:
            for _, name in flow.connector_names.items():
                try:
                    client.delete(name)
                except ConnectorNotFound:
                    pass

    # -- status -------------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        state = self.require()
        flows = []
        for flow in state.flows():
            worker = state.workers.get(flow.connect_cluster)
            connectors: dict[str, Any] = {}
            for role, name in flow.connector_names.items():
                connectors[name] = self._connector_status(state, worker, name)
            flows.append({"name": flow.name, "source": flow.source, "target": flow.target,
                          "connect_url": worker.url if worker else None, "connectors": connectors})
        return {
            "run_dir": str(self.run_dir),
            "kafka_version": state.kafka_version,
            "topology": str(self.topology_path),
            "airflow_connections": str(self.connections_path),
            "security": state.protocols(),
            "clusters": {a: {"bootstrap_servers": c.bootstrap, "cluster_id": c.cluster_id,
                             "pid": c.nodes[0].process.pid if c.nodes[0].process else None,
                             "alive": all(n.process and n.process.alive() for n in c.nodes),
                             "brokers": [{"node_id": n.node_id, "bootstrap_servers": n.bootstrap,
                                          "controller": n.controller_port is not None,
                                          "pid": n.process.pid if n.process else None,
                                          "alive": bool(n.process and n.process.alive())} for n in c.nodes]}
                         for a, c in state.brokers.items()},
            "connect": {a: {"url": w.url, "pid": w.process.pid if w.process else None,
                            "alive": bool(w.process and w.process.alive()), "flows": w.flows}
                        for a, w in state.workers.items()},
            "flows": flows,
            "spark_connect": {"url": state.spark.url, "master": state.spark.master_url, "ui": state.spark.ui,
                              "cluster": [{"name": n.name, "url": f"spark://{spark.HOST}:{n.port}", "ui": n.ui,
                                           "pid": n.process.pid if n.process else None,
                                           "alive": bool(n.process and n.process.alive()),
                                           "log": n.process.log if n.process else None}
                                          for n in state.spark.nodes()],
                              "executor_logs": str(spark.workers_dir(self.run_dir)) if state.spark.master else None,
                              "pid": state.spark.process.pid if state.spark.process else None,
                              "alive": bool(state.spark.process and state.spark.process.alive()),
                              "connection_id": spark.CONN_ID,
                              "log": state.spark.process.log if state.spark.process else None}
            if state.spark else None,
        }

    @staticmethod
    def _connector_status(state: StackState, worker: WorkerState | None, name: str) -> dict[str, Any]:
        if worker is None or not (worker.process and worker.process.alive()):
            return {"state": "UNREACHABLE", "tasks": []}
        try:
            with ConnectClient(state.connect_settings(worker.alias), retry=NO_RETRY) as client:
                st = client.status(name)
            return {"state": st.connector.state, "tasks": [t.state for t in st.tasks]}
        except ConnectorNotFound:
            return {"state": "MISSING", "tasks": []}
        except ConnectError as exc:
            return {"state": "UNREACHABLE", "tasks": [], "error": exc.message}

    # -- down / stop / start ------------------------------------------------------------------------
    def down(self, purge: bool = False) -> list[str]:
        state = self.load()
        stopped: list[str] = []
        if state is not None:
            procs = state.processes()
            stopped = [name for name, rec in procs.items() if rec.alive()]
            # Spark and the workers first (they hold clients on the brokers), then the brokers, together.
            for name, rec in procs.items():
                if not name.startswith("broker"):
                    rec.stop()
            stop_together([rec for name, rec in procs.items() if name.startswith("broker")])
            for c in state.brokers.values():
                for n in c.nodes:
                    n.process = None
            for w in state.workers.values():
                w.process = None
            if state.spark:
                state.spark.process = None
                for node in state.spark.nodes():
                    node.process = None
            self._save(state)
        if purge and self.run_dir.exists():
            shutil.rmtree(self.run_dir)
        return stopped

    def stop_cluster(self, alias: str, kill: bool = False, broker_only: bool = False,
                     broker: int | None = None) -> bool:
        """Take a cluster down as a site failure would: its brokers and the Connect worker that runs
        against it (a worker whose cluster vanished under it can stay wedged after the cluster returns).
        `kill` is a crash (SIGKILL); `broker_only` leaves the worker running; `broker` stops that one broker
        alone (its leaderships and coordinators move to the others), as a rolling restart or a lost host would."""
        state = self.require()
        cluster = self._cluster(state, alias)
        nodes = [cluster.node(broker)] if broker is not None else cluster.nodes
        brokers = [n.process for n in nodes if n.process and n.process.alive()]
        workers = [] if broker_only or broker is not None else [
            w.process for w in state.workers.values() if w.alias == alias and w.process and w.process.alive()]
        for proc in workers:  # the worker first, then the brokers it talks to
            proc.stop(kill=kill)
        stop_together(brokers, kill=kill)
        return bool(brokers or workers)

    def start_cluster(self, alias: str, timeout_s: float = 120.0, broker: int | None = None) -> bool:
        """Bring a stopped cluster back with its data (and its Connect worker, with its connectors RUNNING);
        with `broker`, that one broker alone."""
        state = self.require()
        cluster = self._cluster(state, alias)
        if broker is not None:
            cluster.node(broker)
        java = find_java()
        cp = f"{artifacts.kafka_libs()}/*"
        started: list[str] = []
        self._start_brokers(java, cp, state, timeout_s, started, only=alias, node=broker)
        if broker is None:
            self._start_workers(java, cp, state, timeout_s, started, only=alias)
        if any(name.startswith("connect-") for name in started):
            self._wait_connectors(state, timeout_s, only=alias)
        self._save(state)
        return bool(started)

    @staticmethod
    def _cluster(state: StackState, alias: str) -> ClusterState:
        if alias not in state.brokers:
            raise DevstackError(f"Unknown cluster alias {alias!r}; this stack has {', '.join(state.brokers)}")
        return state.brokers[alias]

    def rss_bytes(self) -> int:
        state = self.load()
        return sum(p.rss_bytes() for p in state.processes().values()) if state else 0


__all__ = ["DevStack", "StackState", "ProcessDied"]
