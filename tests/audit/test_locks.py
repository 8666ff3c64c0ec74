"""One runbook per flow: re-entrant for the same run, a clear refusal naming the holder, audited takeovers."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from mirrorbook.audit import AuditStore, FlowLocked, LockHolder
from mirrorbook.errors import MirrorbookError

SINCE = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
FIRST = LockHolder(run_id="manual__1", dag_id="mm2_failover", user="alice", acquired_at=SINCE)
SECOND = LockHolder(run_id="manual__2", dag_id="mm2_offsets", user="bob")


def test_contention_names_the_holder(store: AuditStore) -> None:
    assert store.acquire_lock("A->B", FIRST) == FIRST
    with pytest.raises(FlowLocked) as err:
        store.acquire_lock("A->B", SECOND)
    assert isinstance(err.value, MirrorbookError)
    assert err.value.message == ("flow A->B is locked by run manual__1 of DAG mm2_failover (triggered by alice) "
                                 "since 2026-03-01T12:00:00.000000Z")
    assert err.value.holder == FIRST
    assert store.acquire_lock("B->A", SECOND) == SECOND  # other flows are independent


def test_reentrant_for_the_same_run(store: AuditStore) -> None:
    store.acquire_lock("A->B", FIRST)
    retry = LockHolder(run_id="manual__1", dag_id="mm2_failover", user="alice")
    assert store.acquire_lock("A->B", retry) == FIRST  # the original holder (and time) is kept
    assert store.lock_holder("A->B") == FIRST


def test_release_only_by_the_holder_and_idempotent(store: AuditStore) -> None:
    store.acquire_lock("A->B", FIRST)
    assert store.release_lock("A->B", "manual__2") is False
    assert store.lock_holder("A->B") == FIRST
    assert store.release_lock("A->B", "manual__1") is True
    assert store.release_lock("A->B", "manual__1") is False
    assert store.lock_holder("A->B") is None
    assert store.acquire_lock("A->B", SECOND) == SECOND


def test_stale_holder_is_taken_over_and_audited(store: AuditStore) -> None:
    store.acquire_lock("A->B", FIRST)
    asked: list[LockHolder] = []
    with pytest.raises(FlowLocked):
        store.acquire_lock("A->B", SECOND, is_stale=lambda h: asked.append(h) or None)
    assert asked == [FIRST]
    assert store.events(action="lock.takeover") == []

    assert store.acquire_lock("A->B", SECOND,
                              is_stale=lambda h: "its DAG run failed" if h.run_id == "manual__1" else None) == SECOND
    assert store.lock_holder("A->B") == SECOND
    [event] = store.events(action="lock.takeover")
    assert (event.flow, event.run_id, event.user, event.mutating) == ("A->B", "manual__2", "bob", False)
    assert event.state_before["holder"]["run_id"] == "manual__1"
    assert event.state_after["holder"]["run_id"] == "manual__2"
    assert event.details["reason"] == "the previous holder, run manual__1, is gone: its DAG run failed"
    assert store.verify().ok


def test_force_unlock_is_audited(store: AuditStore) -> None:
    assert store.force_unlock("A->B", user="oncall") is None
    store.acquire_lock("A->B", FIRST)
    assert store.force_unlock("A->B", user="oncall") == FIRST
    assert store.lock_holder("A->B") is None
    [event] = store.events(action="lock.force_unlock")
    assert (event.user, event.run_id, event.flow) == ("oncall", "manual__1", "A->B")
