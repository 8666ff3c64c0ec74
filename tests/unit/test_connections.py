"""The CLI's connections file (`mirrorbook.connections`): a boundary like the topology file — any content gets
either connections or a precise refusal — and the resolver that reads it as Airflow reads its connections."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorbook.clients import FileResolver
from mirrorbook.connections import connections_for, load_connections, settings_from_connection
from mirrorbook.errors import MirrorbookError
from mirrorbook.topology import Topology

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                    max_leaves=10)


@settings(max_examples=60, deadline=None)
@given(content=st.one_of(JSON.map(json.dumps), st.text(max_size=40),
                         st.dictionaries(st.text(max_size=5), st.fixed_dictionaries(
                             {"conn_type": st.text(max_size=5)}, optional={"extra": JSON, "port": JSON}),
                             max_size=2).map(json.dumps)))
def test_any_file_gives_connections_or_a_refusal_naming_the_file(tmp_path_factory, content):
    path = tmp_path_factory.mktemp("conns") / "airflow-connections.json"
    path.write_text(content)
    try:
        conns = load_connections(path)
    except MirrorbookError as exc:
        assert str(exc).startswith(f"Connections file {path}"), exc  # names the file first
        return
    for conn_id, conn in conns.items():
        assert conn.conn_id == conn_id and isinstance(conn.extra_dejson, dict)
        assert "password" not in repr(conn) or conn.password is None  # never shown


def test_the_file_beside_the_topology_resolves_its_ids_with_secrets_and_connection_wins(tmp_path: Path,
                                                                                         monkeypatch):
    monkeypatch.delenv("MIRRORBOOK_CONNECTIONS", raising=False)
    topo = Topology.model_validate({
        "clusters": {"A": {"connection_id": "kafka_a", "bootstrap_servers": "ignored:1"},
                     "B": {"connection_id": "kafka_b", "bootstrap_servers": "b:9092"}},
        "connect_clusters": {"B": {"connection_id": "connect_b"}},
        "flows": [{"source": "A", "target": "B", "connect_cluster": "B"}]})
    (tmp_path / "topology.yaml").write_text(topo.to_yaml())
    (tmp_path / "airflow-connections.json").write_text(json.dumps({
        "kafka_a": {"conn_type": "kafka", "extra": {"bootstrap.servers": "a:9093", "security.protocol": "SASL_SSL",
                                                    "sasl.password": "pw"}},
        "connect_b": {"conn_type": "kafka_connect", "host": "c", "port": 8443, "schema": "https", "login": "u",
                      "password": "s3", "extra": {"use_tls": True, "verify": "/ca.pem"}}}))
    resolver = FileResolver(topo, connections_for(tmp_path / "topology.yaml"))
    assert resolver.kafka_config("A")["bootstrap.servers"] == "a:9093"  # the connection wins over the address
    assert resolver.kafka_config("B") == {"bootstrap.servers": "b:9092"}  # no connection: the address
    settings_b = resolver.connect_settings("B")
    assert (settings_b.url, settings_b.username, settings_b.verify, settings_b.name) == (
        "https://c:8443", "u", "/ca.pem", "B")
    assert "s3" not in repr(settings_b) and settings_b.password.get_secret_value() == "s3"
    monkeypatch.setenv("MIRRORBOOK_CONNECTIONS", str(tmp_path / "missing.json"))
    with pytest.raises(MirrorbookError, match="missing.json does not exist"):
        connections_for(tmp_path / "topology.yaml")


def test_settings_from_a_file_connection_and_an_airflow_one_are_the_same_function():
    from mirrorbook.airflow.hooks import connect as hook

    assert hook.settings_from_connection is settings_from_connection
