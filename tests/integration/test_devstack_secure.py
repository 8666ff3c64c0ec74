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

import pytest

from mirrorbook.devstack.stack import DevStack
from mirrorbook.devstack.workload import load
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
                              env={**os.environ, "MIRRORBOOK_CONNECTIONS": ""})
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
