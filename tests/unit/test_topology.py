from __future__ import annotations

import pytest

from mirrorbook.topology import Topology, TopologyError, UnknownFlow, load_topology

YAML = """
clusters:
  A: {connection_id: kafka_a, bootstrap_servers: "a:9092"}
  B: {connection_id: kafka_b}
connect_clusters:
  B: {connection_id: connect_b, url: "http://c:8083"}
flows:
  - {source: A, target: B, connect_cluster: B}
groups: "orders-.*"
"""


def test_load_defaults_connector_names(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text(YAML)
    topo = load_topology(p)
    f = topo.flow("A->B")
    assert f.connectors.source == "A->B.MirrorSourceConnector"
    assert f.connectors.checkpoint == "A->B.MirrorCheckpointConnector"
    assert topo.groups_regex(f) == "orders-.*"
    assert Topology.model_validate_json(topo.model_dump_json()) == topo


def test_unknown_flow_lists_known_ones(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text(YAML)
    with pytest.raises(UnknownFlow) as err:
        load_topology(p).flow("B->A")
    assert "A->B" in str(err.value)


@pytest.mark.parametrize("bad,needle", [
    (YAML.replace("connect_cluster: B}", "connect_cluster: X}"), "connect cluster 'X'"),
    (YAML.replace("target: B,", "target: Z,"), "cluster 'Z'"),
    (YAML + "unknown_key: 1\n", "unknown_key"),
    ("clusters: [", "not valid YAML"),
])
def test_invalid_topology_is_named(tmp_path, bad, needle):
    p = tmp_path / "t.yaml"
    p.write_text(bad)
    with pytest.raises(TopologyError) as err:
        load_topology(p)
    assert needle in str(err.value)


def test_missing_file_names_the_fix(tmp_path):
    with pytest.raises(TopologyError) as err:
        load_topology(tmp_path / "nope.yaml")
    assert "MIRRORBOOK_TOPOLOGY" in str(err.value)
