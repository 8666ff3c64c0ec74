"""A group that rewound after MM2 checkpointed it: MM2's checkpoint would skip records; mirrorbook never does.

Scene on the real devstack, a flow of its own at `offset.lag.max` 0 (a sync for every record): a group is
committed at 250 on A and MM2 checkpoints it; then MM2's checkpointing falls behind (its connector is
paused here; after a task restart MM2 cannot translate offsets older than its newest sync either,
KAFKA-14666) and the group rewinds to 89 on A. MM2's latest checkpoint still says 250. Then:
- precise translation writes the exact next record (89's copy) and reports no skip;
- mm2 translation reports the skip, counted against the records themselves;
- the failover's gate refuses the mm2 plan before anything is written, and the precise one runs.
"""

from __future__ import annotations

import re
import uuid

import pytest

from mirrorbook.connect import ConnectClient
from mirrorbook.connect.wait import wait_for
from mirrorbook.devstack.workload import load, produce
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.counts import ZERO, Count
from mirrorbook.mm2.internal_topics import read_checkpoints
from mirrorbook.mm2.precise import translate_precise
from tests.conftest import TEST_MM2
from tests.helpers import eventually, wait_mirrored

pytestmark = [pytest.mark.airflow, pytest.mark.integration]
RECORDS, CHECKPOINTED, REWOUND = 300, 250, 89


@pytest.fixture
def rewound(devstack, admin_a, admin_b, use_topology):
    alias = "K" + uuid.uuid4().hex[:6].upper()
    topic, group = f"rewind-{uuid.uuid4().hex[:6]}", f"rewind-g-{uuid.uuid4().hex[:6]}"
    # The group exists (at 0) before the flow starts, so MM2's checkpoint task runs before any record is
    # mirrored and its sync store sees every sync as it is written.
    load(admin_a.bootstrap, [topic], 1, 0)
    admin_a.alter_group_offsets({group: {TP(topic, 0): 0}})
    topology = devstack.alias_flow(alias, topics=re.escape(topic), mm2=TEST_MM2.model_copy(update={"offset_lag_max": 0}))
    flow = topology.flow(f"{alias}->B")
    remote = TP(f"{alias}.{topic}", 0)
    with ConnectClient(devstack.require().workers["B"].url) as c:
        wait_for(c, flow.connector("checkpoint"), "RUNNING", timeout_s=90, min_tasks=1, fail_fast=False)
    # In batches, each mirrored before the next: MM2's sync writer coalesces a burst into a few syncs (it
    # keeps only the newest pending one), and the checkpoint of 250 is only as good as the syncs below it.
    for _ in range(RECORDS // 30):
        produce(admin_a.bootstrap, [topic], 30)
        wait_mirrored(admin_a, admin_b, topic, remote.topic)
    admin_a.alter_group_offsets({group: {TP(topic, 0): CHECKPOINTED}})

    def checkpoint():
        return read_checkpoints(admin_b.bootstrap, alias, group_filter=group.__eq__).latest.get(
            (group, remote.topic, 0))
    # MM2's first checkpoints are conservative (its store fills as syncs arrive); wait for one past the
    # offset the group will rewind to — the one a consumer would be moved to after the rewind.
    def translated_past_rewind():
        cp = checkpoint()
        assert cp is not None and cp.upstream_offset == CHECKPOINTED and cp.downstream_offset > REWOUND + 10, cp
        return cp
    eventually(translated_past_rewind, timeout=90,
               what=f"MM2's checkpoint of {group} at {CHECKPOINTED}, translated past {REWOUND}")
    # The checkpoint connector falls behind (paused here; a stalled or failing task does the same): the
    # group then rewinds, and MM2's latest checkpoint for it is the old one, above its position.
    with ConnectClient(devstack.require().workers["B"].url) as c:
        c.pause(flow.connector("checkpoint"))
        wait_for(c, flow.connector("checkpoint"), "PAUSED", timeout_s=60)
    admin_a.alter_group_offsets({group: {TP(topic, 0): REWOUND}})
    use_topology(topology, detach=True)
    yield topology, flow, topic, group, remote, checkpoint
    devstack.remove_flow(flow)


def test_precise_never_skips_mm2_reports_the_skip_and_the_gate_refuses_it(rewound, run_dag, admin_b):
    topology, flow, topic, group, remote, checkpoint = rewound
    cp = checkpoint()
    assert cp.upstream_offset == CHECKPOINTED  # MM2 made no checkpoint for the rewind
    report = translate_precise(topology.clusters[flow.source].bootstrap_servers, admin_b.bootstrap, flow.source,
                               "B", re.escape(group), offset_syncs_location="target")
    [row] = report.rows
    assert row.source_offset == REWOUND and row.checkpoint_upstream == CHECKPOINTED
    assert row.precise_offset == REWOUND and (row.offset, row.skip, row.re_read) == (REWOUND, ZERO, ZERO)
    # MM2's checkpoint starts past the group's next record: the records in between counted, not assumed
    # (the topic is mirrored one for one from offset 0, so they are the offsets in between).
    skipped = cp.downstream_offset - REWOUND
    assert row.mm2_offset == cp.downstream_offset and row.mm2_skip == Count.exact(skipped)
    assert report.totals.mm2_skip == Count.exact(skipped) and report.totals.mm2_skipping == 1
    assert report.totals.skip == ZERO

    conf = {"flow": flow.name, "groups": re.escape(group), "drain_timeout": 60, "max_lag": 0}
    refused = run_dag("mm2_failover", {**conf, "translation": "mm2"})
    assert refused.state == "failed"
    assert refused.task_states()["translate_offsets"] == "failed"
    assert refused.task_states()["write_offsets"] == "upstream_failed"
    text = refused.failure()
    assert f"The plan would skip records: {group} {remote.topic}-0 (skip {skipped}, mm2)" in text
    assert refused.mutating_calls() == 0 and admin_b.committed_offsets([group]) == {group: {}}

    done = run_dag("mm2_failover", {**conf, "translation": "precise", "start_reverse_flow": False})
    assert done.state == "success", done.failure() or done.task_states()
    assert admin_b.committed_offsets([group]) == {group: {remote: REWOUND}}
    assert done.report()["plan"]["skipped"] == 0 and done.report()["plan"]["skipped_max"] == 0
