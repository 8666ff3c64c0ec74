"""Replication-policy naming and MirrorClient's topic logic, for Default and Identity policies."""

from __future__ import annotations

import pytest

from mirrorbook.mm2 import remote_cluster_utils as rcu
from mirrorbook.mm2.policy import ReplicationPolicy

DEFAULT = ReplicationPolicy()
IDENTITY = ReplicationPolicy(identity=True, source_alias="A")


def test_default_policy_names():
    assert DEFAULT.format_remote_topic("A", "orders") == "A.orders"
    assert DEFAULT.topic_source("B.A.orders") == "B"
    assert DEFAULT.upstream_topic("B.A.orders") == "A.orders"
    assert DEFAULT.original_topic("B.A.orders") == "orders"
    assert DEFAULT.topic_source("orders") is None
    assert DEFAULT.checkpoints_topic("A") == "A.checkpoints.internal"
    assert DEFAULT.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    custom = ReplicationPolicy(separator="_")
    assert custom.format_remote_topic("A", "orders") == "A_orders"
    assert custom.checkpoints_topic("A") == "A_checkpoints_internal"
    assert ReplicationPolicy(separator="_", internal_separator=False).checkpoints_topic("A") == "A.checkpoints.internal"


def test_identity_policy_names():
    assert IDENTITY.format_remote_topic("A", "orders") == "orders"
    assert IDENTITY.format_remote_topic("A", "heartbeats") == "A.heartbeats"  # heartbeats keep the prefix
    assert IDENTITY.topic_source("orders") == "A"
    assert IDENTITY.upstream_topic("orders") == "orders"
    assert IDENTITY.topic_source("B.heartbeats") == "B"
    assert IDENTITY.checkpoints_topic("A") == "A.checkpoints.internal"


@pytest.mark.parametrize("policy", [DEFAULT, IDENTITY], ids=["default", "identity"])
def test_hops_and_sources_from_heartbeat_topics(policy):
    assert rcu.count_hops_for_topic("A.heartbeats", "A", policy) == 1
    assert rcu.count_hops_for_topic("B.A.heartbeats", "A", policy) == 2
    assert rcu.count_hops_for_topic("B.A.heartbeats", "B", policy) == 1
    assert rcu.count_hops_for_topic("B.A.heartbeats", "C", policy) == -1
    assert rcu.count_hops_for_topic("heartbeats", "A", policy) == -1
    assert rcu.all_sources("B.A.heartbeats", policy) == {"A", "B"}
    assert rcu.is_heartbeat_topic("B.A.heartbeats", policy) and rcu.is_heartbeat_topic("heartbeats", policy)
    assert not rcu.is_heartbeat_topic("A.orders", policy)
    assert rcu.is_checkpoint_topic("A.checkpoints.internal", policy)
    assert not rcu.is_checkpoint_topic("A.orders", policy)


def test_identity_topics_cannot_count_past_their_configured_source():
    # Kafka's cycle guard: an identity-named topic always "comes from" the configured alias.
    assert rcu.count_hops_for_topic("orders", "A", IDENTITY) == 1
    assert rcu.count_hops_for_topic("orders", "B", IDENTITY) == -1
    assert rcu.all_sources("orders", IDENTITY) == {"A"}
    assert rcu.count_hops_for_topic("orders", "A", ReplicationPolicy(identity=True)) == -1  # no alias configured


def test_remote_topic_classification():
    assert rcu.is_remote_topic("A.orders", DEFAULT)
    assert not rcu.is_remote_topic("orders", DEFAULT)
    assert not rcu.is_remote_topic("A.checkpoints.internal", DEFAULT)
    assert rcu.is_remote_topic("orders", IDENTITY)


def test_group_matcher_is_whole_id():
    m = rcu.group_matcher("app-.*")
    assert m("app-1") and not m("my-app-1")
    assert rcu.group_matcher("app")("app") and not rcu.group_matcher("app")("app-1")


@pytest.mark.parametrize("policy", [DEFAULT, IDENTITY], ids=["default", "identity"])
@pytest.mark.parametrize(("topic", "kind"), [
    ("orders", None), ("connections", None), ("connect-configs-events", "connect"), ("A.orders", None),
    ("connect-configs-A.internal", "connect"), ("connect-offsets-A.internal", "connect"),
    ("connect-status-B.internal", "connect"), ("connect-offsets", "connect"), ("connect-cluster-status", "connect"),
    ("mm2-offset-syncs.B.internal", "mm2"), ("B.checkpoints.internal", "mm2"), ("heartbeats", "mm2"),
    ("B.heartbeats", "mm2"), ("__consumer_offsets", "kafka"), ("__transaction_state", "kafka"),
])
def test_non_user_topics_are_named_by_kind(policy, topic, kind):
    # "connect-configs-events" is Connect-named by its prefix: the usual names are all we can know.
    assert policy.non_user_kind(topic) == kind
    assert DEFAULT.non_user_kind(f"B.{topic}") == kind  # a remote copy counts as its original
