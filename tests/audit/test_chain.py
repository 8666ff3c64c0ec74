"""The hash chain: appends link up, and every kind of tampering is found at the right place."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from mirrorbook.audit import AuditEvent, AuditStore, EventNotFound
from mirrorbook.audit.hashing import GENESIS_HASH, event_hash


def _fill(store: AuditStore, n: int = 5, run_id: str = "run-1") -> list:
    return [store.record(action=f"step.{i}", kind="call" if i % 2 else "step", result="ok", mutating=bool(i % 2),
                         run_id=run_id, dag_id="mm2_failover", task_id=f"t{i}", user="alice", flow="A->B",
                         request={"method": "PUT", "path": f"/connectors/c/{i}"}, state_before={"i": i},
                         state_after={"i": i + 1}) for i in range(n)]


def test_append_links_events_and_verifies(store: AuditStore) -> None:
    records = _fill(store)
    assert [r.seq for r in records] == [1, 2, 3, 4, 5]
    assert records[0].prev_hash == GENESIS_HASH
    assert all(b.prev_hash == a.hash for a, b in zip(records, records[1:]))
    result = store.verify()
    assert result.ok and result.checked == 5 and result.head_count == 5 and result.broken is None
    assert store.get(records[2].event_id) == records[2]
    assert store.events(run_id="run-1") == records


def test_empty_store_verifies(store: AuditStore) -> None:
    assert store.verify().ok and store.verify().checked == 0


def test_head_names_the_store_by_its_first_event_and_ends_where_the_chain_does(store: AuditStore, raw) -> None:
    empty = store.head()
    assert empty is not None and empty.seq == 0 and empty.hash == GENESIS_HASH and empty.store is None
    records = _fill(store)
    head = store.head()
    assert (head.seq, head.hash, head.store) == (5, records[-1].hash, records[0].hash)
    assert store.hash_at(3) == records[2].hash and store.hash_at(6) is None
    _fill(store, 2, run_id="run-2")
    assert store.head().store == records[0].hash and store.head().seq == 7  # the identity does not move
    raw("DELETE FROM audit_head")
    assert store.head() is None


def test_hash_covers_the_stored_row(store: AuditStore, raw) -> None:
    rec = _fill(store, 1)[0]
    row = raw("SELECT * FROM audit_events WHERE seq = 1")[0]
    assert event_hash(dict(row._mapping), GENESIS_HASH) == rec.hash


def test_edited_row_is_detected(store: AuditStore, raw) -> None:
    records = _fill(store)
    raw("UPDATE audit_events SET result = 'noop' WHERE seq = 3")
    result = store.verify()
    assert not result.ok and result.checked == 2
    assert result.broken.event_id == records[2].event_id and result.broken.seq == 3
    assert result.broken.reason == "hash mismatch (row edited)"


def test_edited_json_column_is_detected(store: AuditStore, raw) -> None:
    _fill(store)
    raw("UPDATE audit_events SET state_after = :v WHERE seq = 4", v='{"i":99}')
    assert store.verify().broken.seq == 4


def test_edited_and_rehashed_row_breaks_the_next_link(store: AuditStore, raw) -> None:
    records = _fill(store)
    raw("UPDATE audit_events SET mutating = :m WHERE seq = 2", m=False)
    row = raw("SELECT * FROM audit_events WHERE seq = 2")[0]
    raw("UPDATE audit_events SET hash = :h WHERE seq = 2", h=event_hash(dict(row._mapping), row.prev_hash))
    broken = store.verify().broken
    assert broken.event_id == records[2].event_id and broken.reason.startswith("prev_hash mismatch")


def test_deleted_middle_row_is_detected(store: AuditStore, raw) -> None:
    records = _fill(store)
    raw("DELETE FROM audit_events WHERE seq = 3")
    result = store.verify()
    assert not result.ok and result.checked == 2
    assert result.broken.event_id == records[3].event_id
    assert result.broken.reason.startswith("missing predecessor (row deleted)")


def test_deleted_first_row_is_detected(store: AuditStore, raw) -> None:
    _fill(store)
    raw("DELETE FROM audit_events WHERE seq = 1")
    assert store.verify().broken.reason.startswith("missing predecessor")


def test_deleted_tail_row_is_detected(store: AuditStore, raw) -> None:
    _fill(store)
    raw("DELETE FROM audit_events WHERE seq = (SELECT max(seq) FROM audit_events)")
    result = store.verify()
    assert not result.ok and result.checked == 4 and result.head_count == 5
    assert result.broken.seq == 5 and "rows deleted at the tail" in result.broken.reason


def test_every_row_deleted_is_detected(store: AuditStore, raw) -> None:
    _fill(store)
    raw("DELETE FROM audit_events")
    assert "rows deleted at the tail" in store.verify().broken.reason


def test_deleted_head_row_is_detected_and_blocks_appends(store: AuditStore, raw, audit_url: str) -> None:
    _fill(store)
    raw("DELETE FROM audit_head")
    assert store.verify().broken.reason == "head row missing (audit_head deleted)"
    reopened = AuditStore(audit_url)  # schema creation must not silently re-base the trail
    assert not reopened.verify().ok
    with pytest.raises(Exception, match="head row is missing"):
        reopened.record(action="x", kind="step", result="ok")


def test_appends_after_tail_deletion_still_fail_verification(store: AuditStore, raw) -> None:
    _fill(store)
    raw("DELETE FROM audit_events WHERE seq = 5")
    store.record(action="later", kind="step", result="ok")
    broken = store.verify().broken
    assert broken.seq == 6 and broken.reason.startswith("missing predecessor")


def test_queries_filter_and_order(store: AuditStore) -> None:
    _fill(store, 4, run_id="run-1")
    _fill(store, 2, run_id="run-2")
    assert len(store.events()) == 6
    assert [r.action for r in store.events(run_id="run-2")] == ["step.0", "step.1"]
    assert [r.seq for r in store.events(mutating=True)] == [2, 4, 6]
    assert [r.seq for r in store.events(action="step.1", flow="A->B")] == [2, 6]
    assert [r.seq for r in store.events(limit=2)] == [1, 2]
    assert [r.seq for r in store.events(limit=2, newest_first=True)] == [6, 5]
    assert store.events(since=datetime.now(timezone.utc) + timedelta(minutes=1)) == []
    assert len(store.events(since=datetime.now(timezone.utc) - timedelta(minutes=1))) == 6


def test_count_mutating_counts_only_changes(store: AuditStore) -> None:
    for result in ("ok", "error", "planned", "noop", "refused"):
        store.record(action="offsets.alter", kind="call", result=result, mutating=True, run_id="r")
    store.record(action="step.precheck", kind="step", result="ok", mutating=False, run_id="r")
    assert store.count_mutating("r") == 2
    assert store.count_mutating("other") == 0


def test_event_fields_round_trip(store: AuditStore) -> None:
    start = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2)))
    event = AuditEvent(action="offsets.alter", kind="call", result="error", mutating=True, run_id="r", dag_id="d",
                       task_id="t", user="bob", flow="A->B",
                       request={"method": "PATCH", "path": "/connectors/x/offsets", "body": {"n": 3}, "status": 400},
                       state_before=["a", 1, 2.5, None, True], state_after="STOPPED", error="bad request",
                       started_at=start, ended_at=start + timedelta(seconds=1), snapshot_id="snap-1",
                       details={"ünïcode": "✓", "big": 2**62}, event_id="evt-custom")
    stored = store.append(event)
    again = store.get("evt-custom")
    assert again == stored
    assert again.started_at == start and again.started_at.tzinfo == timezone.utc
    assert again.model_dump(exclude={"seq", "prev_hash", "hash"}) == event.model_dump()


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone"):
        AuditEvent(action="x", kind="step", result="ok", started_at=datetime(2026, 1, 1))


def test_unknown_event_id(store: AuditStore) -> None:
    with pytest.raises(EventNotFound):
        store.get("evt-nope")
