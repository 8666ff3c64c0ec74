"""`mirrorbook devstack up --secure` (issue #12 item 1): the session's secured stack, what it writes, what it shows,
and docs/secured.md's walk-through run as written against it."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest

from mirrorbook.devstack.stack import DevStack
from mirrorbook.devstack.workload import GroupSpec, load
from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.reader import read_ranges
from mirrorbook.kafka.types import TP
from mirrorbook.topology import load_topology
from tests import docs
from tests.conftest import ensure_replicating
from tests.helpers import wait_mirrored
from tests.secrets_scan import needles

pytestmark = pytest.mark.integration
MIRRORBOOK = str(Path(sys.executable).parent / "mirrorbook")


def _records(config, tp: TP, end: int) -> list[tuple]:
    return [(m.key(), m.value(), m.timestamp(), m.headers()) for m in read_ranges(config, {tp: (0, end)})]


def test_records_are_mirrored_identically_over_sasl_ssl(secure_devstack: DevStack) -> None:
    """MM2 as the `mm2` principal, within its ACLs, copies every record as it is (read here as `app`)."""
    ensure_replicating(secure_devstack)
    state = secure_devstack.require()
    a, b = state.kafka_config("A", "app"), state.kafka_config("B", "app")
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    load(a, [topic], partitions=3, records_per_partition=200)
    highs = wait_mirrored(KafkaAdmin(a), KafkaAdmin(b), topic, f"A.{topic}")
    for p in range(3):
        src = _records(a, TP(topic, p), 200)
        assert len(src) == 200 and _records(b, TP(f"A.{topic}", p), highs[TP(f"A.{topic}", p)]) == src


def test_what_a_secured_stack_writes_names_connection_ids_and_keeps_secrets_in_0600_files(
        secure_devstack: DevStack) -> None:
    state = secure_devstack.require()
    topo = load_topology(secure_devstack.topology_path)
    assert all(c.bootstrap_servers is None for c in topo.clusters.values())  # connection ids only
    assert all(c.url is None for c in topo.connect_clusters.values())
    conns = json.loads(secure_devstack.connections_path.read_text())
    assert os.stat(secure_devstack.connections_path).st_mode & 0o777 == 0o600
    kafka = conns["mirrorbook_kafka_b"]["extra"]
    assert {k: kafka[k] for k in ("security.protocol", "sasl.mechanism", "sasl.username")} == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "mirrorbook"}
    assert Path(kafka["ssl.ca.location"]).read_text().startswith("-----BEGIN CERTIFICATE-----")
    connect = conns["mirrorbook_connect_b"]
    assert connect["schema"] == "https" and connect["login"] == "mirrorbook" and connect["password"]
    assert connect["extra"] == {"use_tls": True, "verify": kafka["ssl.ca.location"]}
    assert state.workers["B"].url.startswith("https://")
    secrets = needles(secure_devstack.run_dir)
    shown = [secure_devstack.state_path.read_text(), secure_devstack.topology_path.read_text(),
             json.dumps(secure_devstack.status())]
    assert [w for w, v in secrets.items() if any(v in text for text in shown)] == []
    for path in (secure_devstack.run_dir / "security").iterdir():
        if path.name not in ("ca.pem", "connect-jaas.conf"):  # a certificate and a file path: nothing secret
            assert path.stat().st_mode & 0o077 == 0, path


def test_the_secured_walk_through_runs_as_written(secure_devstack: DevStack) -> None:
    """Each command of docs/secured.md's walk-through, its run dir the session's secured stack (whose `down` is
    the session's: that line is only parsed, by tests/dags/test_readme.py)."""
    ensure_replicating(secure_devstack)
    lines = docs.block("tests/integration/test_devstack_secure.py::test_the_secured_walk_through_runs_as_written"
                       ).commands()
    assert lines[0].startswith("mirrorbook devstack up --secure") and lines[-1].startswith("mirrorbook devstack down")
    run_dir = str(secure_devstack.run_dir)
    secrets = needles(secure_devstack.run_dir)
    outputs = {}
    for line in lines[:-1]:
        args = shlex.split(line.replace("/tmp/mirrorbook-secure", run_dir))
        done = subprocess.run([MIRRORBOOK, *args[1:]], capture_output=True, text=True, timeout=300,
                              env={**_without_connections(), "MIRRORBOOK_CONNECTIONS": ""})
        assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])
        outputs[args[1] if args[1] != "devstack" else f"devstack {args[2]}"] = done.stdout + done.stderr
        assert [w for w, v in secrets.items() if v in done.stdout + done.stderr] == [], line
    assert "already running" in outputs["devstack up"]  # the session's stack: up reconciles, changes nothing
    assert "security: kafka SASL_SSL (SCRAM-SHA-512, StandardAuthorizer ACLs), connect https + basic auth" \
        in outputs["devstack status"]
    assert '"produced": 1500' in outputs["devstack load"]
    assert "broker 3 (controller)" in outputs["devstack status"]  # the session's stack: three brokers a cluster
    assert "cluster B broker 2: stopped" in outputs["devstack stop"]  # ... and the flows still replicate:
    assert "cluster B broker 2: started" in outputs["devstack start"]
    assert re.search(r"A->B\s+REPLICATING", outputs["flows"]), outputs["flows"]
    assert "orders-app" in outputs["translate"] and "skips 0 records" in outputs["translate"]


def _without_connections() -> dict[str, str]:
    """This process's environment without connections: no AIRFLOW_CONN_* (the session's are the plaintext
    stack's, under the same ids, and would win over any file), no $MIRRORBOOK_CONNECTIONS or topology."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith("AIRFLOW_CONN_") and k not in ("MIRRORBOOK_CONNECTIONS", "MIRRORBOOK_TOPOLOGY")}


def test_the_cli_on_an_estate_configured_the_airflow_way(secure_devstack: DevStack, tmp_path: Path) -> None:
    """Issue #29 item 2: the secured estate's connections only as AIRFLOW_CONN_* variables — two in Airflow's JSON
    form, two in its URI form (credentials and the CA path percent-encoded) — no connections file reachable, no
    Airflow set up: `mirrorbook flows`, `translate --mode mm2` and `--mode precise` work, as the runbooks do, and
    print no secret. Without the variables, the CLI says where it looked, in order."""
    ensure_replicating(secure_devstack)
    state = secure_devstack.require()
    tag = f"aw{uuid.uuid4().hex[:6]}"
    topic, group = f"{tag}-orders", f"{tag}-app"
    load(state.kafka_config("A", "app"), [topic], partitions=2, records_per_partition=60,
         groups=[GroupSpec(name=group, position="end-7")])
    wait_mirrored(KafkaAdmin(state.kafka_config("A")), KafkaAdmin(state.kafka_config("B")), topic, f"A.{topic}")
    conns = json.loads(secure_devstack.connections_path.read_text())
    kafka_b, connect_b = conns["mirrorbook_kafka_b"], conns["mirrorbook_connect_b"]
    variables = {
        "AIRFLOW_CONN_MIRRORBOOK_KAFKA_A": json.dumps(conns["mirrorbook_kafka_a"]),
        "AIRFLOW_CONN_MIRRORBOOK_CONNECT_A": json.dumps(conns["mirrorbook_connect_a"]),
        "AIRFLOW_CONN_MIRRORBOOK_KAFKA_B": "kafka://?" + urlencode(kafka_b["extra"]),
        "AIRFLOW_CONN_MIRRORBOOK_CONNECT_B": (
            f"kafka-connect://{quote(connect_b['login'], safe='')}:{quote(connect_b['password'], safe='')}@"
            f"{connect_b['host']}:{connect_b['port']}/https?use_tls=true&verify="
            f"{quote(connect_b['extra']['verify'], safe='')}")}
    topology = tmp_path / "estate" / "topology.yaml"  # beside it: no connections file
    topology.parent.mkdir()
    topology.write_text(secure_devstack.topology_path.read_text())
    env = {**_without_connections(), "AIRFLOW_HOME": str(tmp_path / "no-airflow"), **variables}
    secrets = needles(secure_devstack.run_dir)

    def cli(*args: str, environ: dict[str, str] = env) -> subprocess.CompletedProcess:
        done = subprocess.run([MIRRORBOOK, *args, "--topology", str(topology)], capture_output=True, text=True,
                              timeout=300, env=environ)
        assert [w for w, v in secrets.items() if v in done.stdout + done.stderr] == [], args
        return done

    flows = cli("flows")
    assert flows.returncode == 0, flows.stdout + flows.stderr
    assert re.search(r"A->B\s+REPLICATING", flows.stdout) and re.search(r"B->A\s+REPLICATING", flows.stdout), \
        flows.stdout
    mm2 = cli("translate", "--flow", "A->B", "--groups", group, "--mode", "mm2", "--json")
    assert mm2.returncode == 0, mm2.stderr
    out = json.loads(mm2.stdout)
    assert out["mode"] == "mm2" and out["source_readable"] and out["totals"]["committed_partitions"] == 2, out
    precise = cli("translate", "--flow", "A->B", "--groups", group, "--mode", "precise", "--json")
    assert precise.returncode == 0, precise.stderr
    report = json.loads(precise.stdout)
    assert report["totals"]["proven"] == report["totals"]["partitions"] == 2, report["totals"]
    # The same estate without the variables: where the CLI looked, in its order, and nothing else.
    bare = cli("flows", environ={**_without_connections(), "AIRFLOW_HOME": str(tmp_path / "no-airflow")})
    assert bare.returncode == 2
    assert "is defined nowhere: looked in $AIRFLOW_CONN_MIRRORBOOK_" in bare.stderr and \
        f"then the connections file {topology.parent / 'airflow-connections.json'} (absent)" in bare.stderr, bare.stderr
