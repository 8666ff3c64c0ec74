"""Snapshots come back exactly as saved — the basis of rollback — and an altered one is refused."""

from __future__ import annotations

import pytest

from mirrorbook.audit import AuditIntegrityError, AuditStore, InvalidAuditData, SnapshotNotFound


def _offsets(n: int) -> dict:
    return {"offsets": [{"partition": {"cluster": "A", "topic": f"orders-{i % 50}", "partition": i},
                         "offset": {"offset": 10**12 + i}} for i in range(n)],
            "meta": {"float": 0.1, "neg": -7, "flag": False, "none": None, "text": "ünïcode ✓ \"q\" \\ \n",
                     "empty": {}, "list": []}}


def test_round_trip_is_exact(store: AuditStore) -> None:
    payload = _offsets(20_000)
    sid = store.save_snapshot("connector.offsets", "A->B", "A->B.MirrorSourceConnector", payload,
                              run_id="run-1", note="before alter")
    assert sid.startswith("snap-")
    snap = store.snapshot(sid)
    assert snap.payload == payload
    assert (snap.kind, snap.flow, snap.subject, snap.run_id, snap.note) == (
        "connector.offsets", "A->B", "A->B.MirrorSourceConnector", "run-1", "before alter")
    assert snap.size > 1_000_000


def test_listing_filters_without_payloads(store: AuditStore) -> None:
    a = store.save_snapshot("connector.offsets", "A->B", "src", {"n": 1}, run_id="r1")
    b = store.save_snapshot("group.offsets", "A->B", "g1", {"n": 2}, run_id="r1")
    c = store.save_snapshot("group.offsets", "B->A", "g1", {"n": 3}, run_id="r2")
    assert [s.snapshot_id for s in store.snapshots()] == [a, b, c]
    assert [s.snapshot_id for s in store.snapshots(flow="A->B")] == [a, b]
    assert [s.snapshot_id for s in store.snapshots(kind="group.offsets", run_id="r2")] == [c]
    assert not hasattr(store.snapshots()[0], "payload")


def test_altered_snapshot_is_refused_and_fails_verify(store: AuditStore, raw) -> None:
    sid = store.save_snapshot("group.offsets", "A->B", "g1", {"offset": 5})
    raw("UPDATE audit_snapshots SET payload = :p WHERE snapshot_id = :s", p='{"offset":6}', s=sid)
    with pytest.raises(AuditIntegrityError, match="digest mismatch"):
        store.snapshot(sid)
    result = store.verify()
    assert not result.ok and result.broken.snapshot_id == sid


def test_non_json_payloads_are_refused(store: AuditStore) -> None:
    with pytest.raises(InvalidAuditData, match="key 0 is a int"):
        store.save_snapshot("group.offsets", "A->B", "g1", {"partitions": {0: 5}})
    with pytest.raises(InvalidAuditData, match="not valid JSON"):
        store.save_snapshot("group.offsets", "A->B", "g1", {"lag": float("nan")})
    assert store.snapshots() == []


def test_unknown_snapshot(store: AuditStore) -> None:
    with pytest.raises(SnapshotNotFound):
        store.snapshot("snap-nope")
