"""Real Airflow for DAG tests: one migrated DB per session, DAGs parsed from dags/, run with dag.test()."""

from __future__ import annotations

import copy
import json
import logging
import os
import re
import subprocess
import sys
import threading
import uuid
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

from mirrorbook.audit import AuditStore
from mirrorbook.devstack.stack import DevStack
from mirrorbook.topology import Topology
from tests.conftest import REPO, ScratchFlow, ensure_replicating, scratch_on


@pytest.fixture(scope="session")
def airflow_db() -> None:
    out = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], capture_output=True, text=True,
                         env=os.environ)
    assert out.returncode == 0, out.stderr[-3000:]


@pytest.fixture(scope="session")
def airflow_env(devstack: DevStack, airflow_db: None) -> dict[str, str]:
    """The devstack's topology and its Airflow connections (as AIRFLOW_CONN_* variables)."""
    env = {"MIRRORBOOK_TOPOLOGY": str(devstack.topology_path), **connection_env(devstack)}
    os.environ.update(env)
    return env


def connection_env(stack: DevStack) -> dict[str, str]:
    """A stack's Airflow connections as AIRFLOW_CONN_* variables (the proofs' engine stays each test's choice)."""
    return {f"AIRFLOW_CONN_{conn_id.upper()}": json.dumps(spec)
            for conn_id, spec in json.loads(stack.connections_path.read_text()).items()
            if spec.get("conn_type") != "spark_connect"}


def secured_task_logs(stack: DevStack) -> Path:
    """Where the secured tests' task logs go (dag.test() runs tasks in this process and logs to its console):
    the secret scan reads them there."""
    return stack.run_dir / "task-logs"


@contextmanager
def task_log_file(path: Path) -> Iterator[None]:
    """The log records of this process, written to `path` too, for the block: mirrorbook's at INFO and above, Airflow's
    at the level its own logging config gives them (dag.test() runs tasks here; a real Airflow's task logs are
    files, scanned by tests/e2e/test_secrets_nowhere.py)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter("[%(asctime)s] %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        handler.close()


@pytest.fixture
def secured(secure_devstack: DevStack, airflow_env: dict[str, str], monkeypatch: pytest.MonkeyPatch,
            request: pytest.FixtureRequest) -> Iterator[DevStack]:
    """The secured stack replicating both ways, and the DAGs pointed at it for this test: its topology file
    (connection ids only) and its connections — the `mirrorbook` principal on SASL_SSL, Connect on HTTPS with
    basic auth — as Airflow resolves them in production. The test's task logs are kept for the secret scan."""
    ensure_replicating(secure_devstack)
    monkeypatch.setenv("MIRRORBOOK_TOPOLOGY", str(secure_devstack.topology_path))
    for name, value in connection_env(secure_devstack).items():
        monkeypatch.setenv(name, value)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid)[-150:]
    with task_log_file(secured_task_logs(secure_devstack) / f"{name}.log"):
        yield secure_devstack


@pytest.fixture(scope="session")
def dagbag(airflow_env: dict[str, str]) -> Any:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert not bag.import_errors, bag.import_errors
    PRISTINE.update({dag_id: copy.deepcopy(dag.params) for dag_id, dag in bag.dags.items()})
    return bag


# Each DAG's Params as parsed, put back after every run (see run_dag: dag.test() runs tasks in its process).
PRISTINE: dict[str, Any] = {}


@pytest.fixture(scope="session")
def audit(airflow_env: dict[str, str]) -> AuditStore:
    return AuditStore.from_env()


def write_topology(tmp_path: Path, topology: Topology, connect_url: str | None = None,
                   detach: bool = False) -> Path:
    """A topology file for one test. `connect_url` routes its Connect calls (e.g. through a fault proxy);
    `detach` makes it use its own addresses instead of the session's Airflow connections."""
    topo = topology.model_copy(deep=True)
    tag = uuid.uuid4().hex[:6]
    if connect_url or detach:
        for spec in topo.connect_clusters.values():
            spec.url = connect_url or spec.url
            spec.connection_id = f"not_defined_{tag}_{spec.connection_id}"  # so the topology url is used
    if detach:
        for spec in topo.clusters.values():
            spec.connection_id = f"not_defined_{tag}_{spec.connection_id}"
    path = tmp_path / "topology.yaml"
    path.write_text(topo.to_yaml())
    return path


@pytest.fixture
def use_topology(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    def use(topology: Topology, connect_url: str | None = None, detach: bool = False) -> Path:
        path = write_topology(tmp_path, topology, connect_url, detach)
        monkeypatch.setenv("MIRRORBOOK_TOPOLOGY", str(path))
        return path
    return use


class Run:
    def __init__(self, dag_run: Any, audit: AuditStore) -> None:
        self.dag_run = dag_run
        self.run_id = dag_run.run_id
        self.state = str(dag_run.state)
        self.audit = audit

    def task_states(self) -> dict[str, str]:
        return {ti.task_id: str(ti.state) for ti in self.dag_run.get_task_instances()}

    def events(self, kind: str | None = None, **kw: Any) -> list[Any]:
        return [e for e in self.audit.events(run_id=self.run_id, **kw) if kind in (None, e.kind)]

    def xcom(self, task_id: str) -> Any:
        """What the task returned (its XCom), as Airflow stored it."""
        from airflow.models.xcom import XComModel
        from airflow.utils.session import create_session

        with create_session() as session:
            row = session.scalars(XComModel.get_many(run_id=self.run_id, key="return_value", task_ids=task_id,
                                                     dag_ids=self.dag_run.dag_id)).first()
            return None if row is None else XComModel.deserialize_value(row)

    def mutating_calls(self) -> int:
        return self.audit.count_mutating(self.run_id)

    def recorded_result(self) -> str | None:
        """How the run's last task recorded its end in the audit store (what runs_total counts)."""
        return self.audit.run_result(self.run_id)

    def report(self) -> dict[str, Any]:
        """The failover/failback report the run's report task stored (as an audit artifact)."""
        from mirrorbook.runbooks.move_report import read_report

        arts = [a for a in self.audit.artifacts(run_id=self.run_id) if a.kind.endswith("-report")]
        assert arts, f"run {self.run_id} stored no report"
        return read_report(arts[-1].path)

    def failure(self) -> str:
        errors = [e.error for e in self.events() if e.kind == "step" and e.result in ("refused", "error")]
        return "\n".join(e for e in errors if e)


def full_conf(dag: Any, conf: dict[str, Any]) -> dict[str, Any]:
    """Every param explicitly: dag.test() runs tasks in its process, and a run's conf can stick to the
    cached task params of the next run; explicit params keep runs independent (as real runs are).
    Spark parity costs ~20 s a job: tests opt in with parity="spark" where they check it; likewise nobody
    answers an approval here: tests of the approval step (test_approval.py) opt in with approval="required"."""
    return {**dag.params.dump(), **({"parity": "off"} if "parity" in dag.params else {}),
            **({"approval": "skip"} if "approval" in dag.params else {}), **conf}


IDLE_POLL_S = 0.05


@contextmanager
def paced_dag_test() -> Iterator[None]:
    """dag.test()'s own loop sleeps a whole second each time it finds nothing to run: once for every layer of tasks a
    failure marks upstream_failed, one layer a pass (a failover that fails at its precheck: ten seconds of nothing;
    the suite's forty-odd failing runs waited four minutes so). Meanwhile that sleep of dag.test() — told by its
    caller's code, Airflow's `test`, with no task awaiting a human — polls every 50 ms instead. Its wait for a
    Human-in-the-loop answer keeps its second (the answer is written to the same SQLite database from elsewhere: a
    faster poll would only contend with it), and every other sleep (a task's, a retry's) is left as it is."""
    import time

    from airflow.sdk.definitions.dag import DAG

    loop, real = DAG.test.__code__, time.sleep

    def sleep(seconds: float) -> None:
        caller = sys._getframe(1)
        idle = seconds == 1 and caller.f_code is loop and not caller.f_locals.get("awaiting_input_tis")
        real(IDLE_POLL_S if idle else seconds)

    time.sleep = sleep
    try:
        yield
    finally:
        time.sleep = real


@pytest.fixture
def run_dag(dagbag: Any, audit: AuditStore):
    def run(dag_id: str, conf: dict[str, Any], *, rerun_of: Run | None = None, mark_success: str | None = None) -> Run:
        """Run a DAG with dag.test(). `rerun_of` clears that run and runs it again under the same run id
        (what clearing a DAG run in Airflow does); `mark_success` marks matching tasks done without running."""
        dag = dagbag.get_dag(dag_id)  # as shipped: RTO deadlines and all (a test run leaves them to the scheduler)
        kw: dict[str, Any] = {"run_conf": full_conf(dag, conf)}
        if rerun_of is not None:
            kw["logical_date"], kw["run_after"] = rerun_of.dag_run.logical_date, rerun_of.dag_run.run_after
        if mark_success:
            kw["mark_success_pattern"] = mark_success
        try:
            with paced_dag_test():
                return Run(dag.test(**kw), audit)
        finally:
            # A task whose own params hold none of the DAG's (the approval step) resolves the run's conf into the
            # DAG's Param objects themselves; a real worker's process ends there, dag.test()'s does not.
            dag.params = copy.deepcopy(PRISTINE[dag_id])
    return run


@pytest.fixture
def dag_scratch(scratch_flow: ScratchFlow, use_topology) -> Iterator[ScratchFlow]:
    """A scratch flow the DAGs can see (its topology is the one MIRRORBOOK_TOPOLOGY points to)."""
    use_topology(scratch_flow.topology)
    yield scratch_flow


class Webhook:
    """A tiny local HTTP server that keeps every JSON body POSTed to it."""

    def __init__(self) -> None:
        received: list[dict[str, Any]] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.received = received
        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alert?token=s3cret"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "Webhook":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def webhook(monkeypatch: pytest.MonkeyPatch) -> Iterator[Webhook]:
    with Webhook() as hook:
        monkeypatch.setenv("MIRRORBOOK_ALERT_WEBHOOK_URL", hook.url)
        yield hook


@pytest.fixture
def secure_scratch(secured: DevStack, unique: str, use_topology, monkeypatch: pytest.MonkeyPatch
                   ) -> Iterator[ScratchFlow]:
    """A scratch flow on the secured stack that the DAGs see; its alias resolves through cluster A's
    connection (the `mirrorbook` principal), as every id of that topology does."""
    with scratch_on(secured, unique) as scratch:
        conns = json.loads(secured.connections_path.read_text())
        monkeypatch.setenv(f"AIRFLOW_CONN_MIRRORBOOK_KAFKA_{scratch.alias}", json.dumps(conns["mirrorbook_kafka_a"]))
        use_topology(scratch.topology)
        yield scratch


@pytest.fixture
def failures(dagbag, monkeypatch):
    """`watch(dag_id)`: the error each of its tasks ends with, as Airflow hands it to failure callbacks (the
    alerts an operator gets, the task log's last words)."""
    def watch(dag_id: str) -> dict[str, str]:
        seen: dict[str, str] = {}
        for task in dagbag.get_dag(dag_id).tasks:
            monkeypatch.setattr(task, "on_failure_callback",
                                [lambda context, t=task.task_id: seen.__setitem__(t, str(context["exception"]))])
        return seen
    return watch
