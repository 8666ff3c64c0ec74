"""KafkaAdmin against a real broker: batched watermarks, offsets by time and committed offsets, group states,
guarded writes; the per-pass views of an admin and of Clients (one listing, one admin per cluster)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from mirrorbook.clients import Clients, TopologyResolver
from mirrorbook.devstack.workload import GroupSpec, load
from mirrorbook.kafka import admin as admin_module
from mirrorbook.kafka.admin import GroupActive, GroupGotMembers, KafkaAdmin
from mirrorbook.kafka.types import TP
from mirrorbook.topology import Topology
from tests.helpers import ActiveConsumer

pytestmark = pytest.mark.integration


def test_watermarks_and_last_stable_offset_in_one_batch(admin_a, bootstrap_a, unique):
    topic = f"wm-{unique}"
    load(bootstrap_a, [topic], partitions=3, records_per_partition=40)
    # An open transaction on partition 0 holds the last stable offset back; high watermark moves on.
    p = Producer({"bootstrap.servers": bootstrap_a, "transactional.id": f"tx-{unique}"})
    p.init_transactions()
    p.begin_transaction()
    for _ in range(5):
        p.produce(topic, b"v", partition=0)
    p.flush()
    marks = admin_a.watermarks(admin_a.partitions([topic]), with_lso=True)
    assert {tp.partition: (w.low, w.high) for tp, w in marks.items()} == {0: (0, 45), 1: (0, 40), 2: (0, 40)}
    assert marks[TP(topic, 0)].lso == 40 and marks[TP(topic, 1)].lso == 40
    p.abort_transaction()


def test_offsets_for_times_in_one_batch(admin_a, bootstrap_a, unique):
    topic = f"ts-{unique}"
    admin_a.create_topics({topic: 2})
    base = int(time.time() * 1000) - 60_000  # recent: no retention or timestamp bound applies
    p = Producer({"bootstrap.servers": bootstrap_a})
    for i in range(10):
        p.produce(topic, b"v", partition=0, timestamp=base + i * 1000)
    p.flush()
    tps = [TP(topic, 0), TP(topic, 1)]
    assert admin_a.offsets_for_times(tps, base - 1) == {TP(topic, 0): 0, TP(topic, 1): -1}  # 1 is empty
    assert admin_a.offsets_for_times(tps, base + 4500)[TP(topic, 0)] == 5  # first record at or after
    assert admin_a.offsets_for_times(tps, base + 5000)[TP(topic, 0)] == 5
    assert admin_a.offsets_for_times(tps, base + 9001)[TP(topic, 0)] == -1  # nothing that recent
    assert admin_a.offsets_for_times([], base) == {}


def test_a_per_pass_admin_lists_topics_once_on_the_same_connections(bootstrap_a, unique):
    base = KafkaAdmin(bootstrap_a)
    view = base.per_pass()
    assert view.client is base.client
    listed = view.topics()
    base.create_topics({f"{unique}-late": 1})
    assert f"{unique}-late" in base.topics()
    assert view.topics() == listed and view.cluster_id() == base.cluster_id()  # the pass keeps its listing
    view.create_topics({f"{unique}-own": 1})  # ...unless it creates topics itself
    assert {f"{unique}-late", f"{unique}-own"} <= set(view.topics())


def test_per_pass_clients_share_one_admin_per_cluster_config(topology: Topology, unique):
    """Alias X names cluster A with the same client config: one pass gives both one admin, one listing."""
    with_alias = topology.model_copy(update={"clusters": {**topology.clusters, "X": topology.clusters["A"]}})
    clients = Clients(TopologyResolver(with_alias))
    one = clients.per_pass()
    assert one.admin("A") is one.admin("X") and one.admin("A") is not one.admin("B")
    assert one.admin("X").client is clients.admin("A").client  # the base's connections
    one.admin("X").topics()
    clients.admin("A").create_topics({f"{unique}-t": 1})
    assert f"{unique}-t" not in one.admin("A").topics()  # listed once for the pass
    assert f"{unique}-t" in clients.per_pass().admin("X").topics()  # the next pass lists again


@pytest.mark.parametrize("per_batch", [admin_module.GROUPS_PER_BATCH, 3])
def test_committed_offsets_and_states_of_many_groups(admin_a, bootstrap_a, unique, monkeypatch, per_batch):
    """In one batch, and in batches (of 3 here; of a thousand groups in a run, each batch retried on its own)."""
    monkeypatch.setattr(admin_module, "GROUPS_PER_BATCH", per_batch)
    topic = f"grp-{unique}"
    specs = [GroupSpec(name=f"{unique}-g{i}", position=pos) for i, pos in enumerate(["end", "end-7", "3", "none"])]
    load(bootstrap_a, [topic], partitions=2, records_per_partition=20, groups=specs)
    got = admin_a.committed_offsets([s.name for s in specs])
    assert list(got) == [s.name for s in specs]
    assert got[specs[0].name] == {TP(topic, 0): 20, TP(topic, 1): 20}
    assert got[specs[1].name] == {TP(topic, 0): 13, TP(topic, 1): 13}
    assert got[specs[2].name] == {TP(topic, 0): 3, TP(topic, 1): 3}
    assert got[specs[3].name] == {}
    states = admin_a.describe_groups([s.name for s in specs], need="READ")
    assert list(states) == [s.name for s in specs]
    assert states[specs[0].name].state == "EMPTY" and states[specs[0].name].inactive
    assert states[specs[3].name].inactive  # absent
    assert specs[0].name in admin_a.list_groups()


def test_group_states_from_the_listing_agree_with_describes(admin_a, bootstrap_a, unique, monkeypatch):
    """A group listed EMPTY is taken from the listing; an active one and an absent one are described, so each says
    what a describe says (an active group's members and their hosts name it in a refusal)."""
    topic = f"gst-{unique}"
    idle, busy, absent = f"{unique}-idle", f"{unique}-busy", f"{unique}-absent"
    load(bootstrap_a, [topic], partitions=2, records_per_partition=5, groups=[GroupSpec(name=idle, position="2")])
    with ActiveConsumer(bootstrap_a, busy, [topic]):
        described = admin_a.describe_groups([idle, busy, absent])
        asked: list[str] = []
        describe = admin_a.describe_groups
        monkeypatch.setattr(admin_a, "describe_groups", lambda groups: asked.extend(groups) or describe(groups))
        states = admin_a.group_states([idle, busy, absent])
    assert asked == [busy, absent]  # the idle group's state came from the listing
    assert list(states) == [idle, busy, absent]
    for g in (idle, busy, absent):
        assert (states[g].state, states[g].inactive) == (described[g].state, described[g].inactive), g
    assert states[idle].state == "EMPTY" and states[absent].inactive  # a describe says DEAD (or absent)
    assert states[busy].members == 1 and states[busy].member_hosts and not states[busy].inactive
    assert admin_a.group_states([]) == {}


def test_alter_refuses_an_active_group_before_writing_anything(admin_a, bootstrap_a, unique):
    topic = f"alt-{unique}"
    idle, busy = f"{unique}-idle", f"{unique}-busy"
    load(bootstrap_a, [topic], partitions=2, records_per_partition=10,
         groups=[GroupSpec(name=idle, position="2"), GroupSpec(name=busy, position="2")])
    with ActiveConsumer(bootstrap_a, busy, [topic]):
        with pytest.raises(GroupActive) as err:
            admin_a.alter_group_offsets({idle: {TP(topic, 0): 9}, busy: {TP(topic, 0): 9}})
        assert busy in str(err.value) and "STABLE" in str(err.value) and idle not in str(err.value).split(":")[1]
        assert admin_a.committed_offsets([idle])[idle][TP(topic, 0)] == 2  # nothing was written, not even `idle`
        # Without the describe first (a caller that checked already): the broker refuses the busy group's write
        # with the commit itself, by name, and only that one.
        with pytest.raises(GroupGotMembers) as got:
            admin_a.alter_group_offsets({idle: {TP(topic, 0): 7}, busy: {TP(topic, 0): 9}}, require_inactive=False)
        assert list(got.value.groups) == [busy] and busy in str(got.value) and "nothing was written" in str(got.value)
        assert admin_a.committed_offsets([idle, busy]) == {idle: {TP(topic, 0): 7, TP(topic, 1): 2},
                                                           busy: {TP(topic, 0): 2, TP(topic, 1): 2}}
    result = admin_a.alter_group_offsets({idle: {TP(topic, 0): 9, TP(topic, 1): 4}})
    assert result == {idle: {TP(topic, 0): "OK", TP(topic, 1): "OK"}}


def test_topic_listing_with_configs(admin_a, unique):
    topic = f"cfg-{unique}"
    admin_a.create_topics({topic: 4}, configs={"retention.ms": "3600000", "cleanup.policy": "compact"})
    assert admin_a.topics()[topic] == 4
    cfg = admin_a.topic_configs([topic])[topic]
    assert cfg["retention.ms"] == "3600000" and cfg["cleanup.policy"] == "compact"
    assert admin_a.create_topics({topic: 4}) == []  # existing topics are left alone


def test_unreachable_cluster_is_reported_not_hung():
    assert KafkaAdmin("localhost:9").ping(timeout_s=1.0) is False
