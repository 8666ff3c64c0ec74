"""The replication-backend conformance suite: what every backend must do, on the real devstack.

Parametrised by backend kind (`mirrorbook.replication.BACKENDS`); each kind supplies a fresh flow of its
own. MirrorMaker 2 on Connect is the only backend today — a KIP-1279 backend joins by adding its kind and
fixture branches that make mirrors of its own; the assertions stay as they are.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from dataclasses import dataclass
from typing import Iterator

import pytest

from mirrorbook.audit import AuditStore
from mirrorbook.clients import Clients, TopologyResolver
from mirrorbook.connect.models import ConnectorOffsets
from mirrorbook.connect.wait import WaitTimeout
from mirrorbook.devstack.workload import produce
from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.types import TP
from mirrorbook.replication import BACKENDS, ReplicationBackend, all_status, backend_for
from mirrorbook.replication.expect import ConnectorOffsetsAre, ConnectorState
from mirrorbook.core.engine import RunInfo, Runbook
from mirrorbook.errors import GateRefused
from tests.conftest import TEST_MM2
from tests.helpers import eventually, wait_mirrored

pytestmark = pytest.mark.integration


@dataclass
class Subject:
    backend: ReplicationBackend
    clients: Clients
    topic: str          # a source topic the flow replicates (2 partitions)
    admin_src: KafkaAdmin
    admin_dst: KafkaAdmin
    remote: str


@pytest.fixture(params=BACKENDS)
def subject(request, devstack, admin_a, admin_b) -> Iterator[Subject]:
    if request.param != "mm2-connect":
        pytest.fail(f"no fixture for backend {request.param}")
    alias = "C" + uuid.uuid4().hex[:6].upper()
    topic = f"conf-{uuid.uuid4().hex[:6]}"
    admin_a.create_topics({topic: 2})
    produce(admin_a.bootstrap, [topic], 20)
    topology = devstack.alias_flow(alias, topics=re.escape(topic))
    flow = topology.flow(f"{alias}->B")
    assert flow.backend == request.param
    clients = Clients(TopologyResolver(topology))
    backend = backend_for(clients, flow)
    assert isinstance(backend, ReplicationBackend) and backend.kind == request.param
    wait_mirrored(admin_a, admin_b, topic, f"{alias}.{topic}")
    yield Subject(backend, clients, topic, admin_a, admin_b, f"{alias}.{topic}")
    devstack.remove_flow(flow)


@pytest.fixture(params=BACKENDS)
def writing_groups(request, devstack) -> Iterator[ReplicationBackend]:
    """A flow whose replication writes consumer groups' offsets on the target (MM2: sync.group.offsets)."""
    if request.param != "mm2-connect":
        pytest.fail(f"no fixture for backend {request.param}")
    alias = "W" + uuid.uuid4().hex[:6].upper()
    topology = devstack.alias_flow(alias, topics=f"nothing-{alias}",
                                   mm2=TEST_MM2.model_copy(update={"sync_group_offsets": True}))
    flow = topology.flow(f"{alias}->B")
    yield backend_for(Clients(TopologyResolver(topology)), flow)
    devstack.remove_flow(flow)


def _rb(tmp_path, dry_run: bool = False) -> Runbook:
    return Runbook(RunInfo(run_id=f"conformance-{uuid.uuid4().hex[:6]}"),
                   AuditStore(f"sqlite:///{tmp_path / 'audit.db'}"), dry_run=dry_run)


def test_status_is_kip1144_and_lag_is_per_source_partition(subject: Subject):
    def drained():
        s = subject.backend.status()
        mine = [p.lag for p in s.lag if p.topic == subject.topic]
        return s.state.value == "REPLICATING" and len(mine) == 2 and not any(mine) and s
    st = eventually(drained, timeout=60, what="replicating and drained")
    assert st.flow == subject.backend.flow.name and subject.remote in st.replicated_topics
    assert {(p.topic, p.partition) for p in st.lag if p.topic == subject.topic} == {(subject.topic, 0),
                                                                                   (subject.topic, 1)}
    again = asyncio.run(subject.backend.astatus())
    assert (again.state, again.detailed_state) == (st.state, st.detailed_state)


def test_state_changes_are_idempotent_planned_in_a_dry_run_and_reach_kip1144_states(subject: Subject, tmp_path):
    b = subject.backend
    dry = _rb(tmp_path, dry_run=True)
    b.set_state(dry, "PAUSED")
    assert sum(o.mutations for o in dry.outcomes) == 0 and any(o.planned for o in dry.outcomes)
    assert b.status(with_lag=False).state.value == "REPLICATING"  # the dry run changed nothing
    for target, state in (("PAUSED", "NOT_REPLICATING"), ("STOPPED", "DISABLED"), ("RUNNING", "REPLICATING")):
        first = _rb(tmp_path)
        b.set_state(first, target)
        assert sum(o.mutations for o in first.outcomes) > 0, target
        assert eventually(lambda: b.status(with_lag=False).state.value == state, timeout=60, what=state)
        second = _rb(tmp_path)
        b.set_state(second, target)
        assert sum(o.mutations for o in second.outcomes) == 0, target  # already there: nothing sent


def test_replicated_offsets_reach_the_source_end_and_answer_from_the_target_side(subject: Subject):
    tps = subject.admin_src.partitions([subject.topic])
    highs = subject.admin_src.high_watermarks(tps)
    got = eventually(lambda: (r := subject.backend.replicated_offsets()) and all(r.get(tp) == highs[tp] - 1
                                                                              for tp in tps) and r,
                     timeout=60, what="the source end replicated")
    assert {tp: got[tp] for tp in tps} == {tp: highs[tp] - 1 for tp in tps}


def test_offset_mapping_says_where_translation_comes_from(subject: Subject):
    mapping = subject.backend.offset_mapping()
    assert mapping.offset_syncs_location == "target"  # the devstack's alias flows keep their syncs on B
    assert mapping.checkpoint_interval_s == TEST_MM2.checkpoint_interval_s
    include, exclude = subject.backend.replicated_topics_filter()
    assert re.fullmatch(include, subject.topic) and exclude


def test_own_offsets_change_only_when_stopped_and_restore_exactly(subject: Subject, tmp_path):
    b = subject.backend
    entry = eventually(lambda: next((e for e in b.own_offsets("source").offsets
                                     if e.partition.get("topic") == subject.topic and e.offset), None),
                       timeout=60, what="the source connector's committed offsets")
    wanted = ConnectorOffsets.model_validate({"offsets": [{"partition": entry.partition, "offset": {"offset": 3}}]})
    with pytest.raises(GateRefused, match="must be STOPPED"):
        b.change_own_offsets(_rb(tmp_path), "source", "alter", requested=wanted)
    rb = _rb(tmp_path)
    b.set_state(rb, "STOPPED", parts="source")
    read_back: dict[str, tuple[dict, dict]] = {}
    outcome = b.change_own_offsets(rb, "source", "alter", requested=wanted,
                                   on_read_back=lambda part, expected, found:
                                       read_back.update({part: (expected, found)}))
    assert outcome.mutations == 1 and outcome.snapshot_id
    changed = {str(e.partition): e.offset for e in b.own_offsets("source").offsets}
    assert changed[str(entry.partition)] == {"offset": 3}
    name = b.flow.connector("source")
    assert ConnectorOffsetsAre(connector=name, offsets=read_back[name][0]).check(subject.clients, b.flow)[0]
    assert read_back[name][0] == read_back[name][1]  # what was read back while stopped is what was asked
    restored = b.change_own_offsets(rb, "source", "restore", snapshot_id=outcome.snapshot_id)
    assert restored.mutations == 1
    applied, found = ConnectorOffsetsAre(connector=name, offsets=read_back[name][0]).check(subject.clients, b.flow)
    assert not applied and "differ at 1 partition" in found
    assert {str(e.partition): e.offset for e in b.own_offsets("source").offsets}[str(entry.partition)] == entry.offset
    b.set_state(rb, "RUNNING")
    remote0 = TP(subject.remote, 0)
    assert subject.admin_dst.high_watermarks([remote0])[remote0] >= 20


def test_waits_and_reads_see_the_state_a_change_asked_for_and_change_nothing(subject: Subject, tmp_path):
    b = subject.backend
    rb = _rb(tmp_path)
    b.set_state(rb, "PAUSED", wait=False)
    assert set(b.wait_state("PAUSED", timeout_s=60)) == {"source", "checkpoint", "heartbeat"}
    assert b.in_state("PAUSED") and b.in_state("PAUSED", parts="source") and not b.in_state("RUNNING")
    states = b.part_states()
    assert {role: s.connector.state for role, s in states.items()} == dict.fromkeys(states, "PAUSED")
    source = b.flow.connector("source")
    assert ConnectorState(connector=source, state="PAUSED").check(subject.clients, b.flow) == \
        (True, f"{source} is PAUSED (intended PAUSED)")
    assert not ConnectorState(connector=source, state="STOPPED").check(subject.clients, b.flow)[0]
    # a wait changes nothing: asked for a state nobody asked the flow to reach, it times out
    before = rb.audit.count_mutating(rb.info.run_id)
    with pytest.raises(WaitTimeout, match="did not reach STOPPED"):
        b.wait_state("STOPPED", parts="heartbeat", timeout_s=2)
    assert b.in_state("PAUSED") and rb.audit.count_mutating(rb.info.run_id) == before
    b.set_state(rb, "RUNNING", wait=False)
    states = asyncio.run(b.await_state("RUNNING", timeout_s=60, poll_s=0.5))
    assert set(states) == {"source", "checkpoint", "heartbeat"} and b.in_state("RUNNING")


def test_the_parts_are_described_and_placed_without_credentials(subject: Subject):
    b = subject.backend
    views = asyncio.run(b.adescribe_parts())
    assert set(views) == {"source", "checkpoint", "heartbeat"}
    assert all(v is not None and v.info is not None and v.status is not None for v in views.values())
    assert views["source"].info.config["source.cluster.alias"] == b.flow.source
    assert b.flow.connect_cluster in b.place and "@" not in b.place


def test_group_writers_are_the_parts_that_write_group_offsets(subject: Subject, writing_groups: ReplicationBackend):
    assert subject.backend.group_writers() == []  # the devstack does not sync group offsets by default
    assert writing_groups.group_writers() == ["checkpoint"]


def test_all_status_answers_for_every_flow_in_order_as_each_backend_does(subject: Subject):
    flows = [subject.backend.flow, *subject.clients.topology.flows[:1]]
    assert flows[0] is not flows[1]
    statuses = asyncio.run(all_status(subject.clients, flows, with_lag=False))
    assert [s.flow for s in statuses] == [f.name for f in flows]
    one = subject.backend.status(with_lag=False)
    assert (statuses[0].state, statuses[0].connectors.keys()) == (one.state, one.connectors.keys())
    every = asyncio.run(all_status(subject.clients, with_lag=False))
    assert [s.flow for s in every] == subject.clients.topology.flow_names()
