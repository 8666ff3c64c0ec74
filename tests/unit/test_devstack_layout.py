"""`devstack up --brokers N`: the ports, quorum and replication a stack of N brokers a cluster is made with, and a
count out of range refused before anything is written or started."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from mirrorbook.devstack import config
from mirrorbook.cli.devstack import _overrides
from mirrorbook.devstack.errors import DevstackError
from mirrorbook.devstack.stack import DevStack, merged, port_layout
from mirrorbook.cli import build_parser


@given(st.integers(1, 9))
def test_n_brokers_take_a_port_each_and_the_first_three_a_controller_port_too(n):
    s = config.StackSettings(brokers=n)
    assert port_layout(s) == port_layout(config.StackSettings(brokers_of={"A": n, "B": n}))
    layout = port_layout(s)
    voters = 3 if n >= 3 else 1
    assert len(layout) == len(set(layout)) == 2 * (n + voters) + 2
    assert sum(w.startswith("controller A") for w in layout) == voters
    assert layout[-2:] == ["Connect worker B", "Connect worker A"]
    rf = min(3, n)
    assert s.replication_factor("A") == s.replication_factor("B") == rf
    props = config.broker_properties(1, 2, Path("/d"), node_id=1, voters="1@localhost:2", replication_factor=rf)
    assert props["default.replication.factor"] == props["offsets.topic.replication.factor"] == rf
    assert props["min.insync.replicas"] == min(2, rf)  # one broker of three may be lost without refusing writes
    assert config.worker_properties("B", "x:1", 1, s)["offset.storage.replication.factor"] == rf


def test_one_broker_keeps_the_ports_order_it_always_had():
    assert port_layout(config.StackSettings()) == ["broker A", "controller A", "broker B", "controller B",
                                                   "Connect worker B", "Connect worker A"]


def test_a_broker_only_node_has_no_controller_listener():
    props = config.broker_properties(9092, None, Path("/d"), node_id=4, voters="1@localhost:1")
    assert props["process.roles"] == "broker" and "CONTROLLER://" not in props["listeners"]


@settings(max_examples=25, deadline=None)
@given(st.one_of(st.integers(max_value=0), st.integers(min_value=10)))
def test_a_broker_count_out_of_range_is_refused_before_anything_is_written(tmp_path_factory, n):
    run_dir = tmp_path_factory.mktemp("ds")
    args = build_parser().parse_args(["devstack", "up", "--brokers", str(n), "--run-dir", str(run_dir)])
    with pytest.raises(ValidationError, match="brokers"):
        DevStack(run_dir).up(overrides=_overrides(args))
    assert list(run_dir.iterdir()) == []


def test_overrides_merge_into_the_stored_settings_key_by_key():
    s = merged(config.StackSettings(brokers=3), {"mm2": {"offset_lag_max": 7}, "spark_driver_memory_mb": 3072})
    assert (s.brokers, s.mm2.offset_lag_max, s.mm2.checkpoint_interval_s, s.spark_driver_memory_mb) == (3, 7, 5, 3072)


def test_an_unknown_broker_of_a_cluster_is_named_with_the_ones_it_has(tmp_path):
    state = DevStack(tmp_path)._allocate(config.StackSettings(brokers=3), None)
    with pytest.raises(DevstackError, match=r"Cluster B has no broker 7; its brokers are 1, 2, 3"):
        state.brokers["B"].node(7)
    assert state.brokers["A"].voters.count("@localhost:") == 3 and state.brokers["A"].nodes[0].label == "A-1"


def test_a_cluster_of_its_own_size_replicates_as_its_size_says_and_mm2_follows_where_each_topic_lives():
    s = config.StackSettings(brokers_of={"B": 3})
    assert (s.count("A"), s.count("B"), s.replication_factor("A"), s.replication_factor("B")) == (1, 3, 1, 3)
    assert port_layout(s)[:2] == ["broker A", "controller A"] and len(port_layout(s)) == 2 + 6 + 2
    args = build_parser().parse_args(["devstack", "up", "--brokers", "B=3", "--brokers", "2"])
    assert _overrides(args) == {"brokers_of": {"B": 3}, "brokers": 2}
    from mirrorbook.topology import FlowSpec
    flow = FlowSpec(source="A", target="B", connect_cluster="B")
    cfg = config.connector_configs(flow, {"A": "a:1", "B": "b:1"}, config.Mm2Settings(), {"A": 1, "B": 3})
    source = cfg[flow.connector("source")]
    assert source["replication.factor"] == source["checkpoints.topic.replication.factor"] == "3"
    assert source["offset-syncs.topic.replication.factor"] == "1"  # MM2's default: the syncs live on the source
    assert config.worker_properties("B", "b:1", 1, s)["config.storage.replication.factor"] == 3


def test_a_count_for_a_cluster_the_stack_has_not_is_refused_naming_its_clusters():
    with pytest.raises(ValidationError, match="brokers_of names C: this stack's clusters are A, B"):
        config.StackSettings(brokers_of={"C": 3})
    with pytest.raises(SystemExit):
        build_parser().parse_args(["devstack", "up", "--brokers", "B=three"])
