"""The health check's loss accounting, pure: DATA_LOSS gaps counted once across passes, TARGET_RESET from the
previous sample's target topics, and what the sample keeps (the devstack tests provoke both for real:
tests/dags/test_health_loss.py)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from mirrorbook.mm2.flows import ConnectorSummary, DetailedState, FlowStatus, PartitionLag
from mirrorbook.runbooks.health.loss import FlowLoss, TargetTopic, assess, target_resets

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)


def _status(rows: list[tuple[int, int | None, int]]) -> FlowStatus:
    """Partitions of topic `orders` as (high watermark, replicated offset, log start)."""
    conns = {r: ConnectorSummary(name=r, role=r, connector_class=r, state="RUNNING", tasks_running=1, tasks=["RUNNING"])
             for r in ("source", "checkpoint", "heartbeat")}
    lag = [PartitionLag(topic="orders", partition=p, remote_topic="A.orders", high_watermark=h, replicated_offset=r,
                        lag=0, log_start=low) for p, (h, r, low) in enumerate(rows)]
    return FlowStatus(flow="A->B", source="A", target="B", connect_cluster="B", state="REPLICATING",
                      detailed_state=DetailedState(enabled=True, ready=True, allConnectorsRunning=True,
                                                   sourceTaskRunning=True), connectors=conns, lag=lag)


def _topic(name: str, topic_id: str, *parts: tuple[int, int]) -> TargetTopic:
    return TargetTopic(topic=name, topic_id=topic_id, partitions=list(parts))


def _passes(*statuses: FlowStatus) -> list[FlowLoss]:
    """Passes one after the other, each carrying the previous one's sample."""
    out: list[FlowLoss] = []
    for i, status in enumerate(statuses):
        prev = out[-1].sample() if out else None
        out.append(assess(status, [], set(), prev, T0 + timedelta(minutes=5 * (i - 1)) if out else None,
                          T0 + timedelta(minutes=5 * i)))
    return out


def test_a_gap_is_counted_once_while_it_shows_and_grows_and_a_new_one_after_it_adds():
    first, same, grown, closed, again = _passes(
        _status([(100, 9, 50), (100, 99, 0)]),   # partition 0: next offset 10 below the log start 50
        _status([(100, 9, 50), (100, 99, 0)]),   # the same gap, seen again
        _status([(120, 9, 70), (100, 99, 0)]),   # retention took 20 more
        _status([(130, 129, 70), (100, 99, 0)]),  # MM2 read on from the log start: no gap, the count kept
        _status([(200, 129, 160), (100, 99, 0)]))  # a new gap above the counted one
    assert [(g.partition, g.records, g.new) for g in first.gaps] == [(0, 40, 40)]
    assert [(g.records, g.new) for g in same.gaps] == [(40, 0)] and same.total() == 40
    assert [(g.records, g.new) for g in grown.gaps] == [(60, 20)] and grown.total() == 60
    assert closed.gaps == [] and closed.total() == 60
    assert [(g.records, g.new) for g in again.gaps] == [(30, 30)] and again.total("data_loss") == 90
    [row] = again.ledger
    assert (row.through, row.first_at, row.last_at) == (160, T0, T0 + timedelta(minutes=20))


def test_partitions_without_an_offset_or_a_log_start_are_no_gap():
    [loss] = _passes(_status([(100, None, 50), (100, 99, 100)]))  # never replicated; caught up exactly
    assert loss.gaps == [] and loss.total() == 0


def test_resets_truncated_recreated_and_deleted_compare_with_the_previous_sample():
    before = [_topic("A.orders", "id1", (0, 100), (10, 50)), _topic("A.gone", "id2", (5, 8)),
              _topic("A.new-id", "id3", (0, 7)), _topic("A.unmirrored", "id4", (0, 3))]
    now = [_topic("A.orders", "id1", (0, 100), (10, 40)), _topic("A.new-id", "id9", (0, 0))]
    listing = {"A.orders", "A.new-id", "A.unmirrored"}
    got = {(r.topic, r.partition): (r.change, r.records, r.end_now) for r in target_resets(before, now, listing)}
    assert got == {("A.orders", 1): ("truncated", 10, 40), ("A.gone", 0): ("deleted", 3, None),
                   ("A.new-id", 0): ("re-created", 7, 0)}
    assert target_resets(None, now, listing) == [] and target_resets(before, None, listing) == []
    assert target_resets(before, now, None) == []  # the listing was not read: no "deleted"


def test_an_unread_target_carries_the_last_topics_forward_and_resets_fail_the_check_once():
    status = _status([(100, 99, 0)])
    first = assess(status, [_topic("A.orders", "id1", (0, 100))], {"A.orders"}, None, None, T0)
    unread = assess(status, None, None, first.sample(), T0, T0 + timedelta(minutes=5))
    assert unread.resets == [] and unread.target_topics == first.target_topics
    reset = assess(status, [_topic("A.orders", "id2", (0, 0))], {"A.orders"}, unread.sample(),
                   T0 + timedelta(minutes=5), T0 + timedelta(minutes=10))
    assert [(r.change, r.records) for r in reset.resets] == [("re-created", 100)]
    [message] = reset.violations("A->B", "A", "B")
    assert message == ("flow A->B: TARGET_RESET — A.orders on B was deleted and created again (its topic id changed) "
                       f"since the check at {(T0 + timedelta(minutes=5)).isoformat()}: 100 copied record(s) are gone "
                       "from B and MM2 will not copy them again: A.orders-0 100")
    after = assess(status, [_topic("A.orders", "id2", (0, 3))], {"A.orders"}, reset.sample(),
                   T0 + timedelta(minutes=10), T0 + timedelta(minutes=15))
    assert after.resets == [] and after.violations("A->B", "A", "B") == [] and after.total("target_reset") == 100


def test_messages_name_a_few_partitions_and_the_sample_survives_rows_it_cannot_read():
    status = _status([(100, 9, 20)] * 7)
    [loss] = _passes(status)
    [message] = loss.violations("A->B", "A", "B")
    assert message.startswith("flow A->B: DATA_LOSS — 70 record(s) were deleted from A (retention or delete-records) "
                              "before MM2 replicated them; they are on neither cluster: orders-0 10 (offsets 10..19)")
    assert message.endswith("orders-4 10 (offsets 10..19) (+2 more partition(s))")
    sample = loss.sample()
    sample["lost"].append({"cause": "data_loss", "topic": "orders"})  # an unreadable row is left out, not fatal
    back = FlowLoss.from_sample(sample)
    assert back.total() == 70 and len(back.ledger) == 7 and back.target_topics == []
