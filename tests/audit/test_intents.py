"""Write-ahead records: an intent stays open until its outcome is recorded, once; what is open is findable."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from mirrorbook.audit import AuditEvent, AuditStore, LockHolder
from mirrorbook.runbooks.lock import LEASE_S, holder_gone


def _intent(run: str, task: str, flow: str, n: int) -> AuditEvent:
    return AuditEvent(action="groups.alter_offsets", kind="call", result="intent", mutating=True, run_id=run,
                      task_id=task, flow=flow, details={"n": n})


def test_an_intent_is_open_until_its_outcome_is_recorded_once(store: AuditStore) -> None:
    a = store.begin_intent(_intent("manual__1", "write_offsets", "A->B", 1), {"kind": "groups-absent", "n": 1})
    b = store.begin_intent(_intent("manual__1", "stop_flow", "A->B", 2), {"kind": "groups-absent", "n": 2})
    c = store.begin_intent(_intent("manual__2", "write_offsets", "B->A", 3), {"kind": "groups-absent", "n": 3})
    assert [i.event_id for i in store.open_intents("manual__1", "write_offsets")] == [a.event_id]
    assert [i.event_id for i in store.open_intents("manual__1", "write_offsets", ["B->A"])] == [a.event_id, c.event_id]
    assert [i.event_id for i in store.open_intents(flows=["A->B"])] == [a.event_id, b.event_id]
    assert store.open_intents(flows=["A->B"])[0].expect == {"kind": "groups-absent", "n": 1}
    # The count of changes leaves intents out: only outcomes changed (or may have changed) something.
    assert store.count_mutating("manual__1") == 0

    done = AuditEvent(action="groups.alter_offsets", kind="call", result="ok", mutating=True, run_id="manual__1",
                      flow="A->B")
    out = store.close_intent(a.event_id, done)
    assert out is not None and out.details["intent"] == a.event_id and out.seq > a.seq
    assert store.close_intent(a.event_id, done) is None  # a second outcome for the same call is refused
    assert [i.event_id for i in store.open_intents(flows=["A->B"])] == [b.event_id]
    assert store.count_mutating("manual__1") == 1
    assert store.verify().ok


def test_a_holder_is_gone_only_when_provably_so() -> None:
    now = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
    dag = LockHolder(run_id="manual__1", dag_id="mm2_failover", acquired_at=now - timedelta(days=3))
    api = LockHolder(run_id="flows-api__pause__A-B__x", acquired_at=now - timedelta(seconds=LEASE_S - 1))
    assert holder_gone(dag, None, now) is None  # nobody to ask: never a guess
    assert holder_gone(dag, lambda d, r: "running", now) is None
    assert holder_gone(dag, lambda d, r: "queued", now) is None
    assert holder_gone(dag, lambda d, r: "failed", now) == "its DAG run of mm2_failover is failed"
    assert holder_gone(dag, lambda d, r: "success", now) == "its DAG run of mm2_failover is success"

    def unknown(d: str, r: str) -> str:
        raise RuntimeError("not found")
    assert holder_gone(dag, unknown, now) is None
    assert holder_gone(api, None, now) is None
    assert "lease ran out" in (holder_gone(api, None, now + timedelta(seconds=2)) or "")
