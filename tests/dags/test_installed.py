"""The product as a deployment installs it, tried the way Airflow users try a DAG: `airflow dags test`.

The wheel built from this checkout is installed with the lock into a fresh venv outside the checkout and its DAG
folder written by `mirrorbook dags install` — the README's install block, as written (tests/install.py); every
command here runs that venv's `airflow` from a directory of its own, so nothing of include/, spark_apps/ or dags/ can
be imported — the Spark apps come from the package. On the secured stack (SASL_SSL brokers with ACLs, Connect on
HTTPS + basic auth): each runbook's dry run and the health check, then real planned failovers of scratch flows with
both proofs, on the session's Spark Connect server and by spark-submit. The DAGs run as shipped, RTO deadlines and
all. (The same venv serves the e2e module's `airflow standalone`: the plugin's flows API, metrics and page, from the
package's entry point.)
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

import mirrorbook
from mirrorbook.audit import AuditStore
from mirrorbook.devstack.stack import DevStack
from mirrorbook.devstack.workload import GroupSpec, load
from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.types import TP
from tests import docs
from tests.conftest import ensure_replicating
from tests.dags.conftest import connection_env
from tests.helpers import next_seqs_as_group, wait_mirrored
from tests.install import Installed

pytestmark = [pytest.mark.airflow, pytest.mark.integration]

RUN_ID = re.compile(r"DagRun Finished: dag_id=(\S+), logical_date=[^,]*, run_id=([^,]+),.*?state=(\w+)")


class DagsTest:
    """`airflow dags test` of the installed venv, in an Airflow home of its own on the secured stack."""

    def __init__(self, installed: Installed, home: Path, stack: DevStack) -> None:
        self.installed, self.home = installed, home
        self.audit_url = f"sqlite:///{home}/mirrorbook-audit.db"
        self.env = installed.env(
            AIRFLOW_HOME=str(home), AIRFLOW__CORE__DAGS_FOLDER=str(installed.dags),
            AIRFLOW__CORE__LOAD_EXAMPLES="False", AIRFLOW__LOGGING__LOGGING_LEVEL="INFO",
            MIRRORBOOK_AUDIT_URL=self.audit_url, MIRRORBOOK_ARTIFACTS_DIR=str(home / "artifacts"),
            MIRRORBOOK_TOPOLOGY=str(stack.topology_path), **connection_env(stack))
        self.audit = AuditStore(self.audit_url)

    def python(self, code: str) -> str:
        return self._run([self.installed.bin("python"), "-c", code]).stdout

    def _run(self, cmd: list[str], env: dict[str, str] | None = None, timeout: float = 600) -> Any:
        done = subprocess.run(cmd, cwd=self.home, env=env or self.env, capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, f"{cmd} exited {done.returncode}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
        return done

    def __call__(self, dag_id: str, conf: dict[str, Any], **env: str) -> str:
        """Runs the DAG; returns its run id once `airflow dags test` exited 0 with the run successful."""
        return self.finish(self.start(dag_id, conf, self.home, **env))

    def start(self, dag_id: str, conf: dict[str, Any], home: Path, **env: str) -> Try:
        """`airflow dags test` begun, not waited for, in `home`: this one, or a new one holding a copy of this one's
        migrated database — Airflow's SQLite takes one writer at a time, so runs side by side each need their own.
        Its output goes to a file (a pipe no one reads yet would stop it once full)."""
        if home != self.home:
            home.mkdir()
            shutil.copy2(self.home / "airflow.db", home / "airflow.db")
        log = home / f"dags-test-{dag_id}.log"
        with log.open("w") as out:
            proc = subprocess.Popen([self.installed.bin("airflow"), "dags", "test", dag_id, "-c", json.dumps(conf)],
                                    cwd=home, env={**self.env, **env, "AIRFLOW_HOME": str(home)}, text=True,
                                    stdout=out, stderr=subprocess.STDOUT)
        return Try(dag_id, proc, log)

    def finish(self, begun: Try, timeout: float = 600) -> str:
        """The run id of a `start`ed try once it exited 0 with the run successful."""
        begun.proc.wait(timeout=timeout)
        out = begun.log.read_text()
        assert begun.proc.returncode == 0, f"{begun.proc.args} exited {begun.proc.returncode}:\n{out[-8000:]}"
        [(dag, run_id, state)] = RUN_ID.findall(out)
        assert (dag, state) == (begun.dag_id, "success"), out[-4000:]
        return run_id


@dataclass(frozen=True)
class Try:
    dag_id: str
    proc: subprocess.Popen[str]
    log: Path


@pytest.fixture(scope="module")
def dags_test(installed: Installed, secure_devstack: DevStack, tmp_path_factory: pytest.TempPathFactory) -> DagsTest:
    home = tmp_path_factory.mktemp("dags-test-home")
    runner = DagsTest(installed, home, secure_devstack)
    runner._run([installed.bin("airflow"), "db", "migrate"])
    return runner


def test_the_installed_package_is_all_a_deployment_has(dags_test: DagsTest, installed: Installed) -> None:
    """What the README's install block, run as written (tests/install.py), leaves: the package, its Spark apps, its
    topology and plugin inside the venv, the version, the DAG files."""
    readme = docs.block("tests/dags/test_installed.py::test_the_installed_package_is_all_a_deployment_has")
    assert installed.script == readme.text and readme.path == "README.md"
    assert installed.wheel.name == f"mirrorbook-{mirrorbook.__version__}-py3-none-any.whl"
    where = json.loads(dags_test.python(
        "import json, mirrorbook, mirrorbook.parity.submit as s, mirrorbook.topology as t, importlib.metadata as m;"
        "print(json.dumps({'package': mirrorbook.__file__, 'apps': str(s.apps_dir()), "
        "'topology': str(t.Path(t.__file__).parent / 'topology.yaml'), 'version': m.version('mirrorbook'), "
        "'plugins': [e.value for e in m.entry_points(group='airflow.plugins')]}))"))
    site = str(installed.venv / "lib")
    assert where["package"].startswith(site) and where["apps"].startswith(site), where
    assert {p.name for p in Path(where["apps"]).iterdir()} >= {"group_parity.py", "record_parity.py",
                                                                "parity_common.py", "log4j2.properties"}
    assert Path(where["topology"]).is_file() and "mirrorbook.airflow.plugin:MirrorbookPlugin" in where["plugins"]
    assert where["version"] == mirrorbook.__version__
    assert sorted(p.name for p in installed.dags.iterdir()) == sorted(f"{d}.py" for d in _dag_ids())


def _dag_ids() -> tuple[str, ...]:
    from mirrorbook.dag_files import DAG_IDS

    return DAG_IDS


# mm2_failover is tried as installed for real below (with both proofs, by either engine); its dry run changes
# nothing in tests/dags/test_failover.py.
TRIES: dict[str, dict[str, Any]] = {
    "mm2_failback": {"flow": "A->B", "dry_run": True},
    "mm2_pause_resume": {"flow": "A->B", "action": "pause", "dry_run": True},
    "mm2_offsets": {"flow": "A->B", "connector": "source", "action": "reset", "stop_first": True, "dry_run": True},
    "mm2_health_check": {},
}


@pytest.fixture(scope="module")
def tries(dags_test: DagsTest, secure_devstack: DevStack) -> Iterator[dict[str, Try]]:
    """Every try of TRIES begun at once on the secured stack replicating both ways, each in an Airflow home of its
    own: none changes what another reads (the dry runs lock no flow and change nothing, the health check judges the
    flows), and an Airflow CLI's start-up is mostly one core's work."""
    ensure_replicating(secure_devstack)
    started = {dag: dags_test.start(dag, conf, dags_test.home / f"try-{dag}") for dag, conf in TRIES.items()}
    yield started
    for begun in started.values():  # a test that failed before its own try ended leaves nothing running
        if begun.proc.poll() is None:
            begun.proc.kill()
        begun.proc.wait()


@pytest.mark.parametrize("dag_id", list(TRIES))
def test_each_runbook_tries_as_shipped(dags_test: DagsTest, tries: dict[str, Try], dag_id: str) -> None:
    """Airflow's own way to try a DAG, as a new user would: it exits 0, its run succeeds, and a dry run changes
    nothing."""
    run_id = dags_test.finish(tries[dag_id])
    events = dags_test.audit.events(run_id=run_id)
    assert events, f"{dag_id} {run_id} recorded nothing"
    assert dags_test.audit.count_mutating(run_id) == 0


def _failover_scene(scratch: Any, stack: DevStack) -> tuple[list[str], dict[str, str]]:
    """Groups on the scratch flow's topic at several positions, mirrored to B; what the run needs besides: the
    scratch alias's Kafka connection, and the topology with its flow (secure_scratch wrote it)."""
    import os

    a = stack.require().kafka_config("A")
    groups = [f"{scratch.topic}-g{i}" for i in range(3)]
    load(a, [scratch.topic], 2, 80, [GroupSpec(name=g, position=p) for g, p in zip(groups, ["end", "end-9", "13"])])
    wait_mirrored(KafkaAdmin(a), KafkaAdmin(stack.require().kafka_config("B")), scratch.topic, scratch.remote)
    conns = json.loads(stack.connections_path.read_text())
    return groups, {f"AIRFLOW_CONN_MIRRORBOOK_KAFKA_{scratch.alias}": json.dumps(conns["mirrorbook_kafka_a"]),
                    "MIRRORBOOK_TOPOLOGY": os.environ["MIRRORBOOK_TOPOLOGY"]}


@pytest.fixture
def scene(secure_scratch: Any, secured: DevStack) -> Callable[[], tuple[Any, list[str], dict]]:
    return lambda: (secure_scratch, *_failover_scene(secure_scratch, secured))


@pytest.mark.parametrize("engine", ["spark-connect", "spark-submit"])
def test_a_planned_failover_with_both_proofs_as_installed(dags_test: DagsTest, scene, secured: DevStack,
                                                          spark_connect: Any, engine: str) -> None:
    scratch, groups, env = scene()
    if engine == "spark-connect":
        host, port = spark_connect.url.removeprefix("sc://").rstrip("/").split(":")
        env["AIRFLOW_CONN_SPARK_CONNECT_DEFAULT"] = json.dumps({"conn_type": "spark_connect", "host": host,
                                                                "port": int(port)})
    else:
        env["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps({"conn_type": "spark", "host": "local[2]"})
    conf = {"flow": scratch.flow.name, "mode": "planned", "groups": f"{re.escape(scratch.topic)}-g.*",
            "drain_timeout": 120, "max_lag": 0, "parity": "spark", "approval": "skip"}
    run_id = dags_test("mm2_failover", conf, **env)

    verdicts = {e.action: e for e in dags_test.audit.events(run_id=run_id)
                if e.action.startswith("step.parity.") and e.details.get("status") == "passed"}
    assert set(verdicts) == {"step.parity.group_parity", "step.parity.record_parity"}
    engines = {v.details["engine"] for v in verdicts.values()}
    assert engines == ({"spark-connect (spark_connect_default)"} if engine == "spark-connect"
                       else {"spark-submit (local[2])"}), engines
    for v in verdicts.values():
        summary = json.loads((Path(v.details["output"]).parent / "summary.json").read_text())
        assert (summary["master"] == "spark-connect") == (engine == "spark-connect"), summary
    # Every group resumes on B at exactly the next record (the workload's sequence number is its offset on A).
    b = secured.require().kafka_config("B")
    on_a = KafkaAdmin(secured.require().kafka_config("A")).committed_offsets(groups)
    tps = [TP(scratch.remote, p) for p in range(2)]
    for group in groups:
        nxt = next_seqs_as_group(b, group, tps)
        ends = KafkaAdmin(secured.require().kafka_config("A")).high_watermarks([TP(scratch.topic, p) for p in range(2)])
        for p in range(2):
            c = on_a[group][TP(scratch.topic, p)]
            assert nxt[TP(scratch.remote, p)] == (None if c >= ends[TP(scratch.topic, p)] else c), (group, p, nxt)
