"""The Airflow glue resolves clusters through connections: our `kafka_connect` type and the Kafka provider's `kafka`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.airflow


def test_kafka_connect_connection_type_is_registered_with_its_form_fields(airflow_env):
    from airflow.providers_manager import ProvidersManager

    pm = ProvidersManager()
    assert pm.hooks["kafka_connect"].hook_class_name == "mirrorbook.airflow.hooks.connect.KafkaConnectHook"
    widgets = pm.connection_form_widgets
    for field in ("use_tls", "verify", "client_cert", "client_key", "timeout", "retry_deadline"):
        assert f"extra__kafka_connect__{field}" in widgets
    assert "schema" in pm.field_behaviours["kafka_connect"]["hidden_fields"]


def test_hook_builds_tls_and_basic_auth_settings_without_leaking_the_password(monkeypatch, airflow_env):
    from mirrorbook.airflow.hooks.connect import KafkaConnectHook

    monkeypatch.setenv("AIRFLOW_CONN_TLS_CONNECT", json.dumps({
        "conn_type": "kafka_connect", "host": "connect.dr.example", "port": 8443, "login": "ops",
        "password": "pa55-word", "extra": {"use_tls": True, "verify": "/etc/ssl/ca.pem", "timeout": 12,
                                           "retry_deadline": 45}}))
    s = KafkaConnectHook("tls_connect").settings()
    assert s.url == "https://connect.dr.example:8443"
    assert s.username == "ops" and s.password.get_secret_value() == "pa55-word"
    assert s.verify == "/etc/ssl/ca.pem" and s.timeout_s == 12 and s.retry_deadline_s == 45
    assert "pa55-word" not in repr(s) and "pa55-word" not in str(s.model_dump())


def test_hook_talks_to_the_real_connect_and_resolver_prefers_connections(airflow_env, stack_state):
    from mirrorbook.airflow.hooks.connect import KafkaConnectHook
    from mirrorbook.airflow.hooks.mirrorbook import MirrorbookHook

    ok, message = KafkaConnectHook("mirrorbook_connect_b").test_connection()
    assert ok, message
    assert "Kafka Connect 4.3.1" in message
    hook = MirrorbookHook()
    # The devstack's Airflow connections (AIRFLOW_CONN_*) resolve to the same addresses as its topology.
    assert hook.clients.kafka_config("A")["bootstrap.servers"] == stack_state.brokers["A"].bootstrap
    assert hook.clients.resolver.connect_settings("B").url == stack_state.workers["B"].url


@pytest.mark.integration
@pytest.mark.parametrize("sensor_path, model_path, conf", [
    ("mirrorbook.airflow.sensors.connect.ConnectorStateSensor", "mirrorbook.runbooks.params.PauseResumeParams",
     {"action": "resume", "connectors": "all"}),
    ("mirrorbook.airflow.sensors.kafka.ReplicationDrainedSensor", "mirrorbook.runbooks.params.FailoverParams",
     {"max_lag": 0}),
])
def test_a_sensor_builds_its_hook_once_and_reuses_it_and_its_clients_across_pokes(dag_scratch, monkeypatch,
                                                                                    sensor_path, model_path, conf):
    import importlib

    from mirrorbook.airflow.hooks import mirrorbook as hooks
    from mirrorbook.clients import Clients

    def load(path: str):
        module, _, name = path.rpartition(".")
        return getattr(importlib.import_module(module), name)

    # spies: they count, and call the real thing
    built, topologies, admins = [], [], []
    real_init, real_load, real_admin = hooks.MirrorbookHook.__init__, hooks.load_topology, Clients.new_admin

    def init(self, *a, **kw):
        built.append(self)
        real_init(self, *a, **kw)

    monkeypatch.setattr(hooks.MirrorbookHook, "__init__", init)
    monkeypatch.setattr(hooks, "load_topology", lambda *a, **kw: topologies.append(a) or real_load(*a, **kw))
    monkeypatch.setattr(Clients, "new_admin", lambda self, alias: admins.append(alias) or real_admin(self, alias))

    sensor = load(sensor_path)(task_id="wait", params_model=load(model_path))
    context = {"params": {"flow": dag_scratch.flow.name, **conf}}
    seen = []
    for _ in range(3):
        assert sensor.poke(context) in (True, False)
        seen.append((sensor.hook, sensor.hook.clients))
    assert len(built) == 1 and len(topologies) == 1
    assert all(s == seen[0] for s in seen)
    assert len(admins) == len(set(admins))  # each cluster's admin made once, whatever the number of pokes


def test_the_cli_finds_a_connection_kept_in_airflows_metadata_db(airflow_env, devstack, stack_state, tmp_path):
    """Issue #29 item 2: on a host where Airflow is set up, a connection defined only in Airflow's metadata DB (as
    the UI or `airflow connections add` keep it) is what `mirrorbook flows` uses — no AIRFLOW_CONN_* of it, no
    connections file — and `-v` says where each connection came from."""
    from airflow.models.connection import Connection
    from airflow.utils.session import create_session

    conn_id = f"mb_db_{uuid.uuid4().hex[:8]}"
    worker = stack_state.workers["B"]
    with create_session() as session:
        session.add(Connection(conn_id=conn_id, conn_type="kafka_connect", host="localhost", port=worker.rest_port,
                               schema="http"))
    try:
        topo = devstack.require().topology()
        topo.connect_clusters["B"].connection_id, topo.connect_clusters["B"].url = conn_id, None
        (tmp_path / "topology.yaml").write_text(topo.to_yaml())
        env = {k: v for k, v in os.environ.items() if k != "MIRRORBOOK_CONNECTIONS"}
        done = subprocess.run([str(Path(sys.executable).parent / "mirrorbook"), "-v", "flows", "--json",
                               "--topology", str(tmp_path / "topology.yaml")], capture_output=True, text=True,
                              env=env, timeout=900)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        assert {f["flow"]: f["state"] for f in json.loads(done.stdout)} == {"A->B": "REPLICATING",
                                                                          "B->A": "REPLICATING"}
        assert f"connection '{conn_id}': from Airflow's metadata DB" in done.stderr, done.stderr[-3000:]
    finally:
        with create_session() as session:
            session.query(Connection).filter(Connection.conn_id == conn_id).delete()
