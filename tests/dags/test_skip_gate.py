"""Skips are counted, shown and gated: a group that rewound after MM2 checkpointed it, and a group whose next
records retention deleted on the target.

Scene on the real devstack, a flow of its own at `offset.lag.max` 0 (a sync for every record):
- REWOUND: a group committed at 250 on A that MM2 checkpoints; then MM2's checkpointing falls behind (its
  connector is paused here; after a task restart MM2 cannot translate offsets older than its newest sync
  either, KAFKA-14666) and the group rewinds to 89 on A. MM2's latest checkpoint still says 250.
- LOST: a group committed at 30 on A, checkpointed there by MM2; then B's copy of the partition loses its
  records below 60 (deleted, as B's retention would): the copies of A's 30..59 are gone from B.
Then:
- precise translation writes the exact next record (89's copy) for REWOUND, and for LOST the log start 60,
  counting the 30 records it skips; mm2 translation counts MM2's own skips for both;
- `mirrorbook translate --mode mm2` shows the committed offsets, MM2's skips and their totals;
- the failover's gate refuses the mm2 plan (naming both rows) and the precise plan (naming LOST only) before
  anything is written, and lets the precise plan through with allow_skips=true, the acceptance audited.
"""

from __future__ import annotations

import json
import re
import uuid

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorbook import cli
from mirrorbook.connect import ConnectClient
from mirrorbook.connect.wait import wait_for
from mirrorbook.devstack.workload import load, produce
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.counts import ZERO, Count
from mirrorbook.mm2.internal_topics import read_checkpoints
from mirrorbook.mm2.precise import translate_precise
from mirrorbook.runbooks.report import run_report
from tests.conftest import TEST_MM2
from tests.helpers import eventually, wait_mirrored

pytestmark = [pytest.mark.airflow, pytest.mark.integration]
RECORDS, CHECKPOINTED, REWOUND = 300, 250, 89
LOST_AT, LOG_START = 30, 60  # the LOST group's offset on A; B's log start after the deletion


@pytest.fixture
def scene(devstack, admin_a, admin_b, use_topology):
    alias = "K" + uuid.uuid4().hex[:6].upper()
    tag = uuid.uuid4().hex[:6]
    topic, group, lost = f"rewind-{tag}", f"rewind-g-{tag}", f"lost-g-{tag}"
    # The groups exist (at 0) before the flow starts, so MM2's checkpoint task runs before any record is
    # mirrored and its sync store sees every sync as it is written.
    load(admin_a.bootstrap, [topic], 1, 0)
    admin_a.alter_group_offsets({group: {TP(topic, 0): 0}, lost: {TP(topic, 0): 0}})
    topology = devstack.alias_flow(alias, topics=re.escape(topic),
                                   mm2=TEST_MM2.model_copy(update={"offset_lag_max": 0}))
    flow = topology.flow(f"{alias}->B")
    remote = TP(f"{alias}.{topic}", 0)
    with ConnectClient(devstack.require().workers["B"].url) as c:
        wait_for(c, flow.connector("checkpoint"), "RUNNING", timeout_s=90, min_tasks=1, fail_fast=False)
    # In batches, each mirrored before the next: MM2's sync writer coalesces a burst into a few syncs (it
    # keeps only the newest pending one), and the checkpoint of 250 is only as good as the syncs below it.
    for _ in range(RECORDS // 30):
        produce(admin_a.bootstrap, [topic], 30)
        wait_mirrored(admin_a, admin_b, topic, remote.topic)
    admin_a.alter_group_offsets({group: {TP(topic, 0): CHECKPOINTED}, lost: {TP(topic, 0): LOST_AT}})

    def checkpoints():
        latest = read_checkpoints(admin_b.bootstrap, alias, group_filter={group, lost}.__contains__).latest
        return latest.get((group, remote.topic, 0)), latest.get((lost, remote.topic, 0))
    # MM2's first checkpoints are conservative (its store fills as syncs arrive); wait for one past the
    # offset the group will rewind to — the one a consumer would be moved to after the rewind — and for the
    # LOST group's, below what B is about to lose.
    def checkpointed():
        cp, cp_lost = checkpoints()
        assert cp is not None and cp.upstream_offset == CHECKPOINTED and cp.downstream_offset > REWOUND + 10, cp
        assert cp_lost is not None and cp_lost.upstream_offset == LOST_AT and cp_lost.downstream_offset < LOG_START
        return cp, cp_lost
    eventually(checkpointed, timeout=90, what=f"MM2's checkpoints of {group} at {CHECKPOINTED} and {lost} at {LOST_AT}")
    # The checkpoint connector falls behind (paused here; a stalled or failing task does the same): the
    # group then rewinds, and MM2's latest checkpoint for it is the old one, above its position.
    with ConnectClient(devstack.require().workers["B"].url) as c:
        c.pause(flow.connector("checkpoint"))
        wait_for(c, flow.connector("checkpoint"), "PAUSED", timeout_s=60)
    admin_a.alter_group_offsets({group: {TP(topic, 0): REWOUND}})
    # B loses the copies of A's records below 60 (one for one from offset 0), as its retention would.
    client = AdminClient({"bootstrap.servers": admin_b.bootstrap})  # kept: its futures die with it
    [done] = client.delete_records([TopicPartition(remote.topic, 0, LOG_START)], request_timeout=30).values()
    assert done.result(timeout=60).low_watermark == LOG_START
    assert admin_b.watermarks([remote])[remote].low == LOG_START
    path = use_topology(topology, detach=True)
    yield topology, path, flow, group, lost, remote, checkpointed()
    devstack.remove_flow(flow)


def test_skips_are_counted_shown_and_refused_unless_allowed(scene, run_dag, admin_b, audit, capsys):
    topology, path, flow, group, lost, remote, (cp, cp_lost) = scene
    regex = f"{re.escape(group)}|{re.escape(lost)}"
    report = translate_precise(topology.clusters[flow.source].bootstrap_servers, admin_b.bootstrap, flow.source,
                               "B", regex, offset_syncs_location="target")
    rows = {r.group: r for r in report.rows}
    row, gone = rows[group], rows[lost]
    assert row.source_offset == REWOUND and row.checkpoint_upstream == CHECKPOINTED
    assert row.precise_offset == REWOUND and (row.offset, row.skip, row.re_read) == (REWOUND, ZERO, ZERO)
    # MM2's checkpoint starts past the group's next record: the records in between counted, not assumed
    # (the topic is mirrored one for one from offset 0, so they are the offsets in between).
    skipped = cp.downstream_offset - REWOUND
    assert row.mm2_offset == cp.downstream_offset and row.mm2_skip == Count.exact(skipped)
    # LOST: nothing on B holds the copy of A's 30 any more; the log start skips the fewest — A's 30..59.
    assert not gone.proven and "deleted by retention" in gone.reason
    assert (gone.offset, gone.fallback_rule, gone.skip) == (LOG_START, "earliest", Count.exact(LOG_START - LOST_AT))
    assert gone.mm2_offset == cp_lost.downstream_offset and gone.mm2_skip == Count.exact(LOG_START - LOST_AT)
    assert report.totals.skip == Count.exact(LOG_START - LOST_AT) and report.totals.skipping == 1
    assert report.totals.mm2_skip == Count.exact(skipped + LOG_START - LOST_AT) and report.totals.mm2_skipping == 2

    # The CLI's default mode shows the committed offsets on A, MM2's skips and their total (it learns from the
    # flow's connectors that its offset-syncs live on B).
    args = ["translate", "--flow", flow.name, "--groups", regex, "--topology", str(path)]
    capsys.readouterr()
    assert cli.main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    shown = {r["group"]: (r["committed"], r["offset"], Count.model_validate(r["skip"])) for r in out["rows"]}
    assert shown == {group: (REWOUND, cp.downstream_offset, Count.exact(skipped)),
                     lost: (LOST_AT, cp_lost.downstream_offset, Count.exact(LOG_START - LOST_AT))}
    assert Count.model_validate(out["totals"]["skip"]) == report.totals.mm2_skip and out["totals"]["skipping"] == 2
    assert cli.main(args) == 0
    table = capsys.readouterr().out
    assert f"skip {skipped + LOG_START - LOST_AT} records over 2 committed partition(s)" in table
    assert f"{group} {remote.topic}-0: MM2's checkpoint was made for source offset {CHECKPOINTED}, past the group's " \
           f"committed offset {REWOUND} (the group rewound after it): skips {skipped} record(s)" in table
    assert f"{lost} {remote.topic}-0: the target's log starts at {LOG_START}" in table

    conf = {"flow": flow.name, "groups": regex, "drain_timeout": 60, "max_lag": 0, "start_reverse_flow": False}
    mm2 = run_dag("mm2_failover", {**conf, "translation": "mm2"})
    assert (mm2.state, mm2.task_states()["translate_offsets"], mm2.task_states()["write_offsets"]) == \
        ("failed", "failed", "upstream_failed")
    rewound_row = (f"{group} {remote.topic}-0: committed {REWOUND} on {flow.source}, starts at {cp.downstream_offset} "
                   f"on B, skips {skipped} record(s) (mm2)")
    lost_mm2_row = (f"{lost} {remote.topic}-0: committed {LOST_AT} on {flow.source}, starts at "
                    f"{cp_lost.downstream_offset} on B, skips {LOG_START - LOST_AT} record(s) (mm2)")
    text = mm2.failure()
    assert f"The plan would skip {skipped + LOG_START - LOST_AT} record(s) in 2 group-partition(s)" in text
    assert rewound_row in text and lost_mm2_row in text
    assert rewound_row in run_report(audit, mm2.run_id)["text"]  # the run's report, read back from the audit
    [step] = [e for e in mm2.events("step") if e.action == "step.failover.translate"]
    assert {(r["group"], r["source_offset"], r["offset"]) for r in step.details["skipping"]} == \
        {(group, REWOUND, cp.downstream_offset), (lost, LOST_AT, cp_lost.downstream_offset)}
    assert mm2.mutating_calls() == 0 and admin_b.committed_offsets([group, lost]) == {group: {}, lost: {}}

    # Precise skips only what B no longer holds: the gate names that row alone, and refuses it too.
    precise = run_dag("mm2_failover", {**conf, "translation": "precise"})
    assert (precise.state, precise.task_states()["translate_offsets"]) == ("failed", "failed")
    text = precise.failure()
    assert (f"{lost} {remote.topic}-0: committed {LOST_AT} on {flow.source}, starts at {LOG_START} on B, skips "
            f"{LOG_START - LOST_AT} record(s) (fallback:earliest)") in text
    assert group not in text and "retention deleted them" in text
    assert precise.mutating_calls() == 0 and admin_b.committed_offsets([group, lost]) == {group: {}, lost: {}}

    # The operator accepts the loss: the same plan goes through, and says so in the audit and the report.
    allowed = run_dag("mm2_failover", {**conf, "translation": "precise", "allow_skips": True})
    assert allowed.state == "success", allowed.failure() or allowed.task_states()
    assert admin_b.committed_offsets([group, lost]) == {group: {remote: REWOUND}, lost: {remote: LOG_START}}
    [step] = [e for e in allowed.events("step") if e.action == "step.failover.translate"]
    accepted = step.details["allowed_skips"]
    assert accepted.startswith(f"allow_skips=true: the operator accepted {LOG_START - LOST_AT} skipped record(s) "
                               "in 1 group-partition(s)") and f"{lost} {remote.topic}-0" in accepted
    done = allowed.report()
    assert (done["plan"]["skipped"], done["plan"]["skipped_max"]) == (LOG_START - LOST_AT, LOG_START - LOST_AT)
    assert accepted in done["notes"]
    by_group = {r["group"]: r for r in done["rows"]}
    assert (by_group[group]["offset"], by_group[group]["method"], Count.model_validate(by_group[group]["skip"])) == \
        (REWOUND, "precise:aligned", ZERO)
    assert f"the target's log starts at {LOG_START}" in by_group[lost]["note"]
