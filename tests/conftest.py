"""Session-wide fixtures: one real devstack (Kafka A and B, Connect + MM2 both ways) per test session, and
beside it one secured stack (`devstack up --secure`) that only the tests asking for it start.

Set MIRRORBOOK_TEST_RUN_DIR to reuse a stack across pytest runs while developing (it is then left
running at the end); otherwise a fresh stack on free ports is started and purged at the end.
"""

from __future__ import annotations

import os
import re
import sys
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import pytest

from mirrorbook.clients import Clients, cli_clients
from mirrorbook.connect.client import ConnectClient, ConnectSettings
from mirrorbook.connections import FileSource, Lookup
from mirrorbook.connect.wait import reached, wait_for
from mirrorbook.devstack import spark
from mirrorbook.devstack.config import Mm2Settings, StackSettings
from mirrorbook.devstack.stack import DevStack, StackState
from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.topology import Topology

if TYPE_CHECKING:
    from tests.install import Background, Installed

REPO = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    """One Airflow home (DB, audit store, artifacts) per test session, set before Airflow is imported."""
    import tempfile

    home = Path(tempfile.mkdtemp(prefix="mirrorbook-test-airflow-"))
    os.environ["AIRFLOW_HOME"] = str(home)
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO / "dags")
    os.environ["AIRFLOW__CORE__UNIT_TEST_MODE"] = "False"
    os.environ["AIRFLOW__LOGGING__LOGGING_LEVEL"] = "WARNING"
    os.environ["MIRRORBOOK_AUDIT_URL"] = f"sqlite:///{home}/mirrorbook-audit.db"
    os.environ["MIRRORBOOK_ARTIFACTS_DIR"] = str(home / "artifacts")
    # SparkSubmitOperator runs `spark-submit` from PATH: the venv's (pyspark's), on local[2].
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = '{"conn_type": "spark", "host": "local[2]"}'


# What a test needs, read from the fixtures it uses: a test that starts or uses a service (a devstack, a Spark Connect
# server, PostgreSQL, the installed wheel) is marked so, whatever its folder, so that `-m "not services"` (make
# test-fast) runs exactly the tests that need nothing running.
SERVICE_FIXTURES = {"devstack": "integration", "secure_devstack": "integration", "spark_connect": "spark",
                    "pg_cluster": "postgres", "installed": "integration", "scene": "spark", "run_job": "spark"}
FOLDER_MARKS = {"integration": ("integration",), "dags": ("airflow",), "e2e": ("e2e", "airflow", "integration"),
                "spark": ("spark",)}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        folder = Path(str(item.fspath)).relative_to(REPO / "tests").parts[0]
        names = set(FOLDER_MARKS.get(folder, ()))
        names |= {mark for fixture, mark in SERVICE_FIXTURES.items() if fixture in getattr(item, "fixturenames", ())}
        names |= {m.name for m in item.iter_markers() if m.name in ("integration", "spark", "postgres", "e2e")}
        if names & {"integration", "spark", "postgres", "e2e"}:
            names.add("services")
        for name in sorted(names - {m.name for m in item.iter_markers()}):
            item.add_marker(getattr(pytest.mark, name))
    # A test that ends the session's stack runs after every other (a stable sort: the rest keep their order).
    items.sort(key=lambda item: item.get_closest_marker("last") is not None)


INSTALL: dict[str, "Background"] = {}


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start installing the wheel (tests/install.py) in the background as soon as a collected test needs it."""
    if any("installed" in getattr(item, "fixturenames", ()) for item in session.items):
        import tempfile

        from tests.install import Background

        INSTALL["session"] = Background(Path(tempfile.mkdtemp(prefix="mirrorbook-installed-"))).start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    if "session" in INSTALL:
        import shutil

        shutil.rmtree(INSTALL.pop("session").into, ignore_errors=True)


@pytest.fixture(scope="session")
def installed() -> "Installed":
    """mirrorbook built into a wheel and installed into a fresh venv outside the checkout, its DAG folder written
    by `mirrorbook dags install` (tests/install.py)."""
    return INSTALL["session"].result()


TEST_MM2 = Mm2Settings(checkpoint_interval_s=2, refresh_topics_interval_s=2, refresh_groups_interval_s=2,
                       heartbeat_interval_s=1, offset_lag_max=100)


def stack_settings() -> StackSettings:
    return StackSettings(reverse=True, mm2=TEST_MM2)


@pytest.fixture(scope="session")
def devstack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevStack]:
    reuse = os.environ.get("MIRRORBOOK_TEST_RUN_DIR")
    run_dir = Path(reuse) if reuse else tmp_path_factory.mktemp("devstack")
    stack = DevStack(run_dir)
    stack.up(stack_settings())
    yield stack
    if not reuse:
        stack.down(purge=True)


def secure_stack_settings() -> StackSettings:
    return stack_settings().model_copy(update={"secure": True, "brokers_of": {"B": 3}})


@pytest.fixture(scope="session")
def secure_devstack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevStack]:
    """The secured stack — SASL_SSL/SCRAM brokers with ACLs, three on B (a KRaft quorum of three; every topic on B
    three replicas, two in sync required: the failover target whose brokers the tests restart) and one on A,
    Connect on HTTPS + basic auth, both flows — what `mirrorbook devstack up --secure --brokers B=3` starts: the
    secured and the multi-broker path in one stack (three brokers on A too would cost the whole suite their
    upkeep and test nothing B's do not). Started by the first test that asks (the failover module, the
    secured runbooks, the refusals, the secret scan); the others never pay for it."""
    stack = DevStack(tmp_path_factory.mktemp("devstack-secure"))
    stack.up(secure_stack_settings())
    yield stack
    stack.down(purge=True)


def ensure_replicating(stack: DevStack) -> None:
    """Both clusters up and every connector of both flows RUNNING (after a test stopped, paused or killed some)."""
    stack.start_cluster("A")
    state = stack.require()
    for flow in state.flows():
        with ConnectClient(state.connect_settings(flow.connect_cluster)) as c:
            for role, name in flow.connectors.items():
                st = c.status(name)
                if st.connector.state in ("PAUSED", "STOPPED"):
                    c.resume(name)
                elif not reached(st, "RUNNING"):
                    # After its cluster was killed, a worker can keep a stale UNASSIGNED/FAILED status.
                    c.restart(name, include_tasks=True)
                wait_for(c, name, "RUNNING", timeout_s=120, min_tasks=0 if role == "checkpoint" else 1,
                         fail_fast=False)


def serving_pems(stack: DevStack, into: Path) -> tuple[str, str]:
    """The secured stack's certificate and key as PEM files (0600) in `into`: for a local HTTPS server of a test
    (the fault proxy in front of Connect) that clients trusting the stack's CA accept."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    from mirrorbook.devstack.security import write_private

    material = stack.require().security
    assert material is not None, "a secured stack has a certificate"
    password = material.secrets().keystore_password.get_secret_value().encode()
    key, cert, _ = pkcs12.load_key_and_certificates(material.keystore.read_bytes(), password)
    cert_path, key_path = into / "proxy-cert.pem", into / "proxy-key.pem"
    write_private(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    write_private(key_path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption()))
    return str(cert_path), str(key_path)


def stack_clients(stack: DevStack) -> Clients:
    """Clients for a stack as the CLI sees it: its topology file through the connections file beside it (on a
    secured stack, the `mirrorbook` principal and Connect's basic-auth user) — that file only: the AIRFLOW_CONN_*
    variables a test set may be another stack's."""
    return cli_clients(str(stack.topology_path), lookup=Lookup([FileSource(stack.connections_path)]))


@dataclass(frozen=True)
class SparkConnectServer:
    url: str  # sc://127.0.0.1:PORT
    pid: int
    started: list[str]  # what the `devstack up --spark-workers 1` that brought it up started
    others_before: dict[str, int]  # the stack's other processes (name -> pid) before that `up`
    master: str  # spark://127.0.0.1:PORT, the cluster's standalone master
    master_ui: str  # its web UI (/json/: the workers and applications)
    ui: str  # the server's web UI, whose status API says which executor ran each task
    workers: dict[str, int]  # the cluster's workers: name -> pid (each executor is a child of its worker)
    work_dir: Path  # the workers' work dir: an application's executors' logs in <app id>/<executor id>/


# The session's server runs on a standalone cluster of one worker: every proof the suite runs over Spark Connect
# (tests/spark, tests/dags) has its tasks run by an executor in a JVM of their own, as on a real cluster.
SPARK_SESSION = {"spark": True, "spark_workers": 1}


def is_spark(name: str) -> bool:
    """A process of the stack's Spark: the Connect server, or its cluster's master and workers."""
    return name.startswith("spark-")


@pytest.fixture(scope="session")
def spark_connect(devstack: DevStack) -> Iterator[SparkConnectServer]:
    """The session stack's Spark Connect server, on its cluster, added by the first test that asks (others never
    pay for it).

    `up` with SPARK_SESSION (what `devstack up --spark-workers 1` passes) is a reconciler: on the running stack only
    the cluster and the server start. The session's `down` stops them with the rest — after this process's client
    session is closed, or pyspark would retry releasing it at exit against a server that is gone.
    """
    others = {n: p.pid for n, p in devstack.require().processes().items() if not is_spark(n)}
    result = devstack.up(overrides=SPARK_SESSION)
    state = devstack.require()
    assert state.spark and state.spark.process and state.spark.ui and state.spark.master
    yield SparkConnectServer(url=state.spark.url, pid=state.spark.process.pid, started=result["started"],
                             others_before=others, master=state.spark.master_url, master_ui=state.spark.master.ui,
                             ui=state.spark.ui, workers={n.name: n.process.pid for n in state.spark.workers
                                                         if n.process},
                             work_dir=spark.workers_dir(devstack.run_dir))
    from mirrorbook.parity import connect
    connect.close()


@pytest.fixture(scope="session")
def stack_state(devstack: DevStack) -> StackState:
    return devstack.require()


@pytest.fixture(scope="session")
def topology(devstack: DevStack) -> Topology:
    return devstack.require().topology()


@pytest.fixture(scope="session")
def bootstrap_a(stack_state: StackState) -> str:
    return stack_state.brokers["A"].bootstrap


@pytest.fixture(scope="session")
def bootstrap_b(stack_state: StackState) -> str:
    return stack_state.brokers["B"].bootstrap


@pytest.fixture(scope="session")
def admin_a(bootstrap_a: str) -> KafkaAdmin:
    return KafkaAdmin(bootstrap_a)


@pytest.fixture(scope="session")
def admin_b(bootstrap_b: str) -> KafkaAdmin:
    return KafkaAdmin(bootstrap_b)


@pytest.fixture(scope="session")
def connect_b_url(stack_state: StackState) -> str:
    return stack_state.workers["B"].url


@pytest.fixture(scope="session")
def connect_a_url(stack_state: StackState) -> str:
    return stack_state.workers["A"].url


@pytest.fixture
def unique(request: pytest.FixtureRequest) -> str:
    """A short name unique to this test, for its own topics and groups on the shared stack."""
    base = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:30]
    return f"{base}-{uuid.uuid4().hex[:6]}"


class ScratchFlow:
    """A flow of a test's own: alias S<hex> for cluster A, replicating only `topic` to B; `connect` reaches B's
    Connect worker (its CA and basic-auth user on a secured stack)."""

    def __init__(self, topology: Topology, alias: str, topic: str,
                 connect: ConnectSettings | str | None = None) -> None:
        self.topology = topology
        self.flow = topology.flow(f"{alias}->B")
        self.alias = alias
        self.topic = topic
        self.remote = f"{alias}.{topic}"
        self.connect = connect


@contextmanager
def scratch_on(stack: DevStack, unique: str) -> Iterator[ScratchFlow]:
    """A scratch flow on `stack` for the duration of the block."""
    state = stack.require()
    alias = "S" + uuid.uuid4().hex[:6].upper()
    topic = f"scratch-{unique}"
    KafkaAdmin(state.kafka_config("A")).create_topics({topic: 2})
    topology = stack.alias_flow(alias, topics=re.escape(topic))
    scratch = ScratchFlow(topology, alias, topic, state.connect_settings("B"))
    # The topic exists before the flow, so its source gets a task: wait for it, or a test that
    # compares states before and after would see MM2's own task assignment as a change.
    with ConnectClient(state.connect_settings(scratch.flow.connect_cluster)) as client:
        wait_for(client, scratch.flow.connectors.source, "RUNNING", min_tasks=1)
    try:
        yield scratch
    finally:
        stack.remove_flow(scratch.flow)


@pytest.fixture
def scratch_flow(devstack: DevStack, unique: str) -> Iterator[ScratchFlow]:
    with scratch_on(devstack, unique) as scratch:
        yield scratch
