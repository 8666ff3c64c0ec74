"""Snapshots: what a mutation is about to overwrite, stored as one canonical JSON text with its digest,
so a rollback restores exactly what was there and a changed payload is detected on read."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Row, Select, and_, select

from mirrorbook.audit import schema
from mirrorbook.audit.codec import loads, lookup, new_id, parse_time, stored_row, utcnow
from mirrorbook.audit.errors import AuditIntegrityError, SnapshotNotFound
from mirrorbook.audit.hashing import digest
from mirrorbook.audit.models import Snapshot, SnapshotInfo
from mirrorbook.bounds import shown

_c = schema.snapshots.c
_INFO_COLUMNS = [c for c in schema.snapshots.c if c.name not in ("id", "payload")]


def save(conn: Connection, kind: str, flow: str | None, subject: str, payload: dict[str, Any],
         run_id: str | None, note: str | None) -> str:
    row = stored_row(schema.snapshots, {"snapshot_id": new_id("snap"), "created_at": utcnow(), "payload": payload,
                                        "kind": kind, "flow": flow, "subject": subject, "run_id": run_id,
                                        "note": note})
    text = row["payload"]
    conn.execute(schema.snapshots.insert().values(payload_sha256=digest(text), size=len(text.encode("utf-8")), **row))
    return row["snapshot_id"]


def _info(row: Row[Any]) -> dict[str, Any]:
    data = {c.name: row._mapping[c.name] for c in _INFO_COLUMNS}
    data["created_at"] = parse_time(data["created_at"])
    return data


def load(conn: Connection, snapshot_id: str) -> Snapshot:
    row = conn.execute(select(schema.snapshots).where(lookup(_c.snapshot_id, snapshot_id))).first()
    if row is None:
        raise SnapshotNotFound(f"no snapshot {shown(snapshot_id)} in the audit store",
                               "list them with: mirrorbook audit snapshots")
    if digest(row.payload) != row.payload_sha256:
        raise AuditIntegrityError(f"snapshot {shown(snapshot_id)}: payload digest mismatch (edited after it was taken)",
                                  "do not restore from it; run `mirrorbook audit verify`")
    return Snapshot(payload=loads(row.payload), **_info(row))


def listing(flow: str | None, kind: str | None, run_id: str | None) -> Select[Any]:
    conds = [lookup(c, v) for c, v in ((_c.flow, flow), (_c.kind, kind), (_c.run_id, run_id)) if v is not None]
    return select(*_INFO_COLUMNS).where(and_(True, *conds)).order_by(_c.id)


def info(row: Row[Any]) -> SnapshotInfo:
    return SnapshotInfo(**_info(row))
