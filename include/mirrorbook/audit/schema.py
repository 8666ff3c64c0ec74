"""Tables (SQLAlchemy Core), created by the store itself. Timestamps are fixed-width UTC text and JSON
is canonical text, so a row hashes the same on SQLite and PostgreSQL. Each column's type says how the
store bounds what it keeps (`codec.stored`): `String(n)` a short value, `Text` a long one, and `info`
marks the JSON columns (AUDIT_JSON: bounded; DATA_JSON: read back by the program, never cut)."""

from __future__ import annotations

from sqlalchemy import (BigInteger, Boolean, Column, Connection, Index, Integer, MetaData, String, Table, Text,
                        func, select)

from mirrorbook.audit.codec import AUDIT_JSON, DATA_JSON
from mirrorbook.audit.hashing import GENESIS_HASH

metadata = MetaData()
_Id = BigInteger().with_variant(Integer, "sqlite")  # SQLite autoincrements only INTEGER PRIMARY KEY
_Time = String(27)
_Hash = String(64)

events = Table(
    "audit_events", metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=False),  # position in the chain, from 1
    Column("event_id", String(64), nullable=False, unique=True),
    Column("run_id", String(250)), Column("dag_id", String(250)), Column("task_id", String(250)),
    Column("user", String(250)), Column("flow", String(250)),
    Column("action", String(100), nullable=False), Column("kind", String(10), nullable=False),
    Column("mutating", Boolean, nullable=False), Column("result", String(10), nullable=False),
    Column("request", Text, info=AUDIT_JSON), Column("state_before", Text, info=AUDIT_JSON),
    Column("state_after", Text, info=AUDIT_JSON),
    Column("error", Text), Column("started_at", _Time, nullable=False), Column("ended_at", _Time, nullable=False),
    Column("snapshot_id", String(64)), Column("details", Text, nullable=False, info=AUDIT_JSON),
    Column("prev_hash", _Hash, nullable=False), Column("hash", _Hash, nullable=False),
    Index("ix_audit_events_run", "run_id"), Index("ix_audit_events_flow", "flow"),
    Index("ix_audit_events_started", "started_at"),
)
JSON_EVENT_COLUMNS = tuple(c.name for c in events.c if "json" in c.info)

# One row (id 1): how many events were written and the last hash — updated with every append, so
# deleting rows at the tail (which leaves a valid shorter chain) is still detected.
head = Table(
    "audit_head", metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("count", BigInteger, nullable=False), Column("hash", _Hash, nullable=False),
    Column("updated_at", _Time, nullable=False),
)
HEAD_ID = 1

snapshots = Table(
    "audit_snapshots", metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("snapshot_id", String(64), nullable=False, unique=True),
    Column("kind", String(100), nullable=False), Column("flow", String(250)),
    Column("subject", String(500), nullable=False), Column("run_id", String(250)), Column("note", Text),
    Column("created_at", _Time, nullable=False),
    Column("payload", Text, nullable=False, info=DATA_JSON), Column("payload_sha256", _Hash, nullable=False),
    Column("size", BigInteger, nullable=False),
    Index("ix_audit_snapshots_flow", "flow"), Index("ix_audit_snapshots_run", "run_id"),
)

flow_locks = Table(
    "audit_flow_locks", metadata,
    Column("flow", String(250), primary_key=True),
    Column("run_id", String(250), nullable=False), Column("dag_id", String(250)), Column("user", String(250)),
    Column("acquired_at", _Time, nullable=False),
)

# Write-ahead: a mutating call's intent is recorded (in the chain, and here) before the call is made, and
# its row deleted in the transaction that records the outcome. A row left here is a call whose outcome
# nobody saw (the process died): the next run holding the flow checks it against the real state.
intents = Table(
    "audit_intents", metadata,
    Column("event_id", String(64), primary_key=True),
    Column("flow", String(250)), Column("run_id", String(250), nullable=False), Column("task_id", String(250)),
    Column("action", String(100), nullable=False),
    Column("expect", Text, nullable=False, info=DATA_JSON),  # what the call leaves in place, checkable later
    Column("created_at", _Time, nullable=False),
    Index("ix_audit_intents_flow", "flow"), Index("ix_audit_intents_run", "run_id"),
)

run_progress = Table(
    "audit_run_progress", metadata,
    Column("run_id", String(250), primary_key=True), Column("key", String(250), primary_key=True),
    Column("value", Text, nullable=False, info=DATA_JSON), Column("updated_at", _Time, nullable=False),
)

flow_metrics = Table(
    "audit_metrics", metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("flow", String(250), nullable=False), Column("observed_at", _Time, nullable=False),
    Column("metrics", Text, nullable=False, info=DATA_JSON),  # health history: RPO estimates read it back
    Index("ix_audit_metrics_flow_time", "flow", "observed_at"),
)

# Readiness: per flow and (group, target partition), the best position a failover could write, proven while
# the source was readable (the health check keeps it; an unplanned failover falls back on it). Compact: a
# row changes only when its value does; the pass that last confirmed a flow's rows is in its metrics sample.
positions = Table(
    "audit_positions", metadata,
    Column("flow", String(250), primary_key=True), Column("group", String(250), primary_key=True),
    Column("topic", String(250), primary_key=True), Column("partition", Integer, primary_key=True),
    Column("source_topic", String(250), nullable=False), Column("source_offset", BigInteger, nullable=False),
    Column("target_offset", BigInteger, nullable=False), Column("rule", String(100), nullable=False),
    Column("exact", Boolean, nullable=False), Column("observed_at", _Time, nullable=False),
)

# The newest replication sample per flow: the source's end offsets and what MM2 had replicated, seconds old (the
# RPO sampler, `runbooks/rpo_sampler.py`, replaces it every poll; an unplanned failover's RPO bound reads it).
# Bounded: one row per flow, never a history.
replication_samples = Table(
    "audit_replication_samples", metadata,
    Column("flow", String(250), primary_key=True), Column("observed_at", _Time, nullable=False),
    Column("sample", Text, nullable=False, info=DATA_JSON),
)

artifacts = Table(
    "audit_artifacts", metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("kind", String(100), nullable=False), Column("run_id", String(250)),
    # a path is opened again (drill reports): bounded like one (PATH_MAX), not cut to 200 characters
    Column("path", Text, nullable=False, info={"limit": 4096}),
    Column("summary", Text, nullable=False, info=AUDIT_JSON),
    Column("created_at", _Time, nullable=False),
    Index("ix_audit_artifacts_run", "run_id"),
)

# How each runbook run (and health check run) ended — one row per completion, appended by the run's last task
# (a cleared run that completes again adds one): what `mirrorbook_runbook_runs_total{dag,result}` counts.
run_results = Table(
    "audit_run_results", metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("dag_id", String(250), nullable=False), Column("run_id", String(250), nullable=False),
    Column("result", String(20), nullable=False), Column("ended_at", _Time, nullable=False),
    Index("ix_audit_run_results_run", "run_id"),
)


def create_schema(conn: Connection, now: str) -> None:
    """Create missing tables and the head row. Run inside a serialized write transaction (idempotent).

    The head row is created only for an empty trail: a trail whose head was deleted must stay
    detectably broken, not be silently re-based.
    """
    metadata.create_all(conn, checkfirst=True)
    has_head = conn.execute(select(head.c.id).where(head.c.id == HEAD_ID)).first() is not None
    if not has_head and conn.execute(select(func.count()).select_from(events)).scalar_one() == 0:
        conn.execute(head.insert().values(id=HEAD_ID, count=0, hash=GENESIS_HASH, updated_at=now))
