"""AuditStore: the append-only audit trail every runbook step writes to, plus what runs need around it
(snapshots for rollback, per-flow locks, resumable progress, metrics history, artifacts).

Everything written is redacted, escaped and bounded by the store (`codec.stored_row`: any request is
recorded, on either backend, however large or strange its values). Events form a SHA-256 hash chain;
a head row holding the count and last hash is moved in the same transaction, so edits, deletions and
tail truncation show up in `verify()`. Safe for many processes at once: writes are serialized by the
database (see database.py).
"""

from __future__ import annotations

import getpass
from datetime import datetime
from typing import Any, Callable, Iterator, Sequence

from sqlalchemy import select

from mirrorbook.audit import chain, history, intents, locks, schema, snapshots
from mirrorbook.audit.codec import format_time, lookup, utcnow
from mirrorbook.audit.database import Database, default_url
from mirrorbook.audit.errors import EventNotFound, FlowLocked
from mirrorbook.audit.models import (Artifact, AuditEvent, AuditRecord, ChainHead, GroupPosition, LockHolder,
                                     MetricsSample, OpenIntent, Snapshot, SnapshotInfo, VerifyResult)
from mirrorbook.bounds import shown

TAKEOVER_ATTEMPTS = 3


class AuditStore:
    """The audit store at `url` (a SQLAlchemy URL or a SQLite file path; None: `default_url()`)."""

    def __init__(self, url: str | None = None) -> None:
        self._db = Database(url or default_url())
        with self._db.write() as conn:
            schema.create_schema(conn, format_time(utcnow()))

    @classmethod
    def from_env(cls) -> "AuditStore":
        """`$MIRRORBOOK_AUDIT_URL`, else the SQLite file `$AIRFLOW_HOME/mirrorbook/audit.db`."""
        return cls(default_url())

    @property
    def url(self) -> str:
        """The URL with its password hidden: the only form to print."""
        return self._db.display_url

    @property
    def backend(self) -> str:
        return self._db.backend

    def close(self) -> None:
        self._db.dispose()

    # -- events ---------------------------------------------------------------------------------
    def append(self, event: AuditEvent) -> AuditRecord:
        """Redact, escape and bound `event`, link it to the chain head and store it; returns it as stored
        (with seq and hashes)."""
        return self.append_all([event])[0]

    def append_all(self, events: Sequence[AuditEvent]) -> list[AuditRecord]:
        """`append` for many events in one transaction (one commit — its fsync is what an event costs)."""
        with self._db.write() as conn:
            return chain.append_many(conn, events)

    def record(self, **fields: Any) -> AuditRecord:
        """`append(AuditEvent(**fields))`."""
        return self.append(AuditEvent(**fields))

    # -- write-ahead: intent before a mutating call, outcome after -------------------------------
    def begin_intent(self, event: AuditEvent, expect: dict[str, Any]) -> AuditRecord:
        """Record a mutating call before it is made (`event.result == "intent"`) and keep it open, with
        `expect` — what the call leaves in place — until `close_intent` records its outcome."""
        return self.begin_intents([(event, expect)])[0]

    def begin_intents(self, calls: Sequence[tuple[AuditEvent, dict[str, Any]]]) -> list[AuditRecord]:
        """`begin_intent` for many calls in one transaction: all are on record before any is made."""
        with self._db.write() as conn:
            records = chain.append_many(conn, [event for event, _ in calls])
            intents.insert_many(conn, [(record, expect) for record, (_, expect) in zip(records, calls)])
            return records

    def close_intent(self, intent_id: str, outcome: AuditEvent) -> AuditRecord | None:
        """Record the outcome of an open intent (linked by `details.intent`) and close it, in one transaction.
        None when the intent was closed already: its outcome is on record once, never twice."""
        return self.close_intents([(intent_id, outcome)])[0]

    def close_intents(self, outcomes: Sequence[tuple[str, AuditEvent]], *, records: bool = True
                      ) -> list[AuditRecord | None]:
        """`close_intent` for many intents in one transaction. `records=False`: the outcomes are not read back as
        records (a thousand of them cost more than their insert); returns [] then."""
        with self._db.write() as conn:
            still = intents.open_among(conn, [intent_id for intent_id, _ in outcomes])
            closing, seen = [], set()
            for intent_id, outcome in outcomes:  # an intent named twice is closed (and its outcome kept) once
                if intent_id in still and intent_id not in seen:
                    seen.add(intent_id)
                    closing.append((intent_id, outcome.model_copy(update={"details": {**outcome.details,
                                                                                      "intent": intent_id}})))
            intents.delete_many(conn, [intent_id for intent_id, _ in closing])
            appended = chain.append_many(conn, [o for _, o in closing], records=records)
            if not records:
                return []
            kept = dict(zip([i for i, _ in closing], appended))
            return [kept.pop(intent_id, None) for intent_id, _ in outcomes]

    def open_intents(self, run_id: str | None = None, task_id: str | None = None,
                     flows: list[str] | None = None) -> list[OpenIntent]:
        """Intents without an outcome: those of `run_id`'s task `task_id`, and with `flows`, any run's on them."""
        with self._db.read() as conn:
            return [intents.to_intent(r) for r in conn.execute(intents.query(run_id, task_id, flows))]

    def iter_events(self, run_id: str | None = None, flow: str | None = None, action: str | None = None,
                    mutating: bool | None = None, since: datetime | None = None, limit: int | None = None,
                    newest_first: bool = False) -> Iterator[AuditRecord]:
        """Events matching every given filter, in chain order (oldest first unless `newest_first`);
        `limit` keeps the first N of that order; `since` compares `started_at`. Streams large trails."""
        stmt = chain.query(run_id, flow, action, mutating, since, limit, newest_first)
        with self._db.read() as conn:
            for row in conn.execution_options(yield_per=chain.VERIFY_BATCH).execute(stmt):
                yield chain.to_record(row)

    def events(self, run_id: str | None = None, flow: str | None = None, action: str | None = None,
               mutating: bool | None = None, since: datetime | None = None, limit: int | None = None,
               newest_first: bool = False) -> list[AuditRecord]:
        return list(self.iter_events(run_id, flow, action, mutating, since, limit, newest_first))

    def get(self, event_id: str) -> AuditRecord:
        with self._db.read() as conn:
            ev = schema.events.c
            row = conn.execute(select(schema.events).where(lookup(ev.event_id, event_id))).first()
        if row is None:
            raise EventNotFound(f"no audit event {shown(event_id)}", "list events with: mirrorbook audit list")
        return chain.to_record(row)

    def count_mutating(self, run_id: str) -> int:
        """Mutating events of the run that changed (or may have changed) something: result ok or error.
        Planned (dry run), noop and refused calls changed nothing and are not counted."""
        with self._db.read() as conn:
            return int(conn.execute(chain.count_changing(run_id)).scalar_one())

    def verify(self) -> VerifyResult:
        """Recompute the chain from genesis, compare with the head row, check snapshot digests."""
        with self._db.read() as conn:
            return chain.verify(conn)

    def head(self) -> ChainHead | None:
        """Where the chain ends and which store this is (what an anchor witnesses); None if the head row is gone."""
        with self._db.read() as conn:
            return chain.head_of(conn)

    def hash_at(self, seq: int) -> str | None:
        """The stored hash of the event at `seq` (None if there is none)."""
        with self._db.read() as conn:
            return chain.hash_at(conn, seq)

    # -- snapshots ------------------------------------------------------------------------------
    def save_snapshot(self, kind: str, flow: str | None, subject: str, payload: dict[str, Any], *,
                      run_id: str | None = None, note: str | None = None) -> str:
        """Store what is about to be overwritten; returns its id ("snap-<ULID>") for the event that follows."""
        with self._db.write() as conn:
            return snapshots.save(conn, kind, flow, subject, payload, run_id, note)

    def snapshot(self, snapshot_id: str) -> Snapshot:
        """The snapshot with its payload, exactly as saved (after redaction); raises if it was altered."""
        with self._db.read() as conn:
            return snapshots.load(conn, snapshot_id)

    def snapshots(self, flow: str | None = None, kind: str | None = None,
                  run_id: str | None = None) -> list[SnapshotInfo]:
        """Snapshot metadata, oldest first (payloads can be large: fetch one with `snapshot(id)`)."""
        with self._db.read() as conn:
            return [snapshots.info(r) for r in conn.execute(snapshots.listing(flow, kind, run_id))]

    # -- per-flow locks -------------------------------------------------------------------------
    def acquire_lock(self, flow: str, holder: LockHolder,
                     is_stale: Callable[[LockHolder], str | None] | None = None) -> LockHolder:
        """Take the flow's lock for `holder.run_id`; returns the effective holder.

        Re-entrant for the same run id (task retries keep the original holder). Held by another run:
        `FlowLocked`, unless `is_stale(current)` says why that run is gone — then the lock is taken over
        (compare-and-swap: never two holders) and the takeover is audited with both holders and that
        reason. `is_stale` returns None while the holder may be alive; it runs outside any transaction
        (it may call Airflow).
        """
        flow_key = locks.key(flow)
        for _ in range(TAKEOVER_ATTEMPTS):
            with self._db.write() as conn:
                current = locks.holder(conn, flow_key)
                if current is None:
                    locks.insert(conn, flow, holder)
                    return holder
            if locks.same_run(current, holder):
                return current
            gone = is_stale(current) if is_stale is not None else None
            if not gone:
                raise FlowLocked(flow_key, current)  # named as listings show it: `audit unlock` takes that
            with self._db.write() as conn:
                if locks.replace(conn, flow_key, current, holder):
                    chain.append(conn, _lock_event("lock.takeover", flow, current, holder, holder.user,
                                                   f"the previous holder, run {current.run_id}, is gone: {gone}"))
                    return holder
        assert current is not None, "each attempt found a holder (or took the lock and returned)"
        with self._db.read() as conn:
            raise FlowLocked(flow_key, locks.holder(conn, flow_key) or current)

    def release_lock(self, flow: str, run_id: str) -> bool:
        """Release the flow if `run_id` holds it. Idempotent; another run's lock is left alone (False)."""
        with self._db.write() as conn:
            return locks.delete(conn, locks.key(flow), run_id)

    def lock_holder(self, flow: str) -> LockHolder | None:
        """Who holds `flow` — named as a run names it, or as a listing showed it."""
        with self._db.read() as conn:
            return locks.holder(conn, locks.shown_key(conn, flow))

    def force_unlock(self, flow: str, user: str | None = None) -> LockHolder | None:
        """Remove any holder (an operator's decision, audited); returns who held it. `flow` as a run
        names it, or as a listing showed it."""
        operator = user or getpass.getuser()
        with self._db.write() as conn:
            flow_key = locks.shown_key(conn, flow)
            current = locks.holder(conn, flow_key)
            if current is None:
                return None
            locks.delete(conn, flow_key)
            chain.append(conn, _lock_event("lock.force_unlock", flow, current, None, operator,
                                           f"released by {operator}"))
            return current

    # -- run progress ---------------------------------------------------------------------------
    def progress_get(self, run_id: str, key: str, default: Any = None) -> Any:
        """What a run recorded under `key` (so a cleared task skips completed mutations), else `default`."""
        with self._db.read() as conn:
            found, value = history.progress_get(conn, run_id, key)
        return value if found else default

    def progress_has(self, run_id: str, key: str) -> bool:
        """Whether a run recorded anything under `key` (without reading it: a plan can be megabytes)."""
        with self._db.read() as conn:
            return history.progress_has(conn, run_id, key)

    def progress_set(self, run_id: str, key: str, value: Any) -> None:
        with self._db.write() as conn:
            self._db.upsert(conn, schema.run_progress, history.progress_values(run_id, key, value),
                            ("run_id", "key"))

    def progress(self, run_id: str) -> dict[str, Any]:
        with self._db.read() as conn:
            return history.progress_all(conn, run_id)

    # -- metrics history ------------------------------------------------------------------------
    def record_metrics(self, flow: str, observed_at: datetime, metrics: dict[str, Any]) -> MetricsSample:
        with self._db.write() as conn:
            return history.insert_metrics(conn, flow, observed_at, metrics)

    def metrics(self, flow: str, since: datetime | None = None, until: datetime | None = None,
                limit: int | None = None, newest_first: bool = True, source: str | None = None) -> list[MetricsSample]:
        """Samples with since <= observed_at <= until, NEWEST FIRST by default (limit=1: the last known);
        with `source`, only samples whose `source` is that (the health check's, a drill's)."""
        with self._db.read() as conn:
            if source is None:
                return [history.to_metrics(r) for r in conn.execute(history.metrics_query(flow, since, until, limit,
                                                                                          newest_first))]
            # The query narrows by the text; the parsed sample decides (streamed: only as many as needed are read).
            stmt = history.metrics_query(flow, since, until, None, newest_first, source)
            found: list[MetricsSample] = []
            for row in conn.execution_options(yield_per=50).execute(stmt):
                sample = history.to_metrics(row)
                if sample.metrics.get("source") == source:
                    found.append(sample)
                    if limit is not None and len(found) >= limit:
                        break
            return found

    def latest_metrics(self, flow: str, source: str | None = None) -> MetricsSample | None:
        """The newest sample of `flow` (of that `source` only, when given)."""
        found = self.metrics(flow, limit=1, source=source)
        return found[0] if found else None

    # -- run results ----------------------------------------------------------------------------
    def record_run_result(self, dag_id: str, run_id: str, result: str) -> None:
        """How a run ended (`success`, `failed`, `dry_run`), appended by its last task."""
        with self._db.write() as conn:
            history.insert_run_result(conn, dag_id, run_id, result)

    def run_result(self, run_id: str) -> str | None:
        """How the run ended when it last ended (None: it has not)."""
        with self._db.read() as conn:
            return history.run_result(conn, run_id)

    def run_result_counts(self) -> dict[tuple[str, str], int]:
        """Completed runs per (DAG, result), over the whole store."""
        with self._db.read() as conn:
            return history.run_result_counts(conn)

    # -- readiness positions --------------------------------------------------------------------
    def positions(self, flow: str) -> list[GroupPosition]:
        """The flow's readiness positions (see schema.positions)."""
        with self._db.read() as conn:
            return history.positions(conn, flow)

    def position_rows(self, flow: str) -> list[tuple[str, str, int, str, int, int, str, bool, str]]:
        """The flow's readiness positions as plain tuples (see history.position_rows): a failover checks them all."""
        with self._db.read() as conn:
            return history.position_rows(conn, flow)

    def update_positions(self, flow: str, changed: list[GroupPosition], gone: list[tuple[str, str, int]]) -> None:
        """Write the positions whose value changed and drop those no longer there (one transaction)."""
        if not changed and not gone:
            return
        with self._db.write() as conn:
            self._db.upsert_many(conn, schema.positions, history.positions_values(flow, changed),
                                 ("flow", "group", "topic", "partition"))
            history.delete_positions(conn, flow, gone)

    # -- the newest replication sample per flow ---------------------------------------------------
    def keep_replication_sample(self, flow: str, observed_at: datetime, sample: dict[str, Any]) -> bool:
        """Keep `sample` as the flow's newest, unless the one kept is newer (two samplers may overlap). Returns
        whether it was kept. At most one row per flow: bounded storage, never a history."""
        values = history.replication_sample_values(flow, observed_at, sample)
        with self._db.write() as conn:
            kept = history.replication_sample(conn, flow)
            if kept is not None and kept.observed_at > observed_at:
                return False
            self._db.upsert(conn, schema.replication_samples, values, ("flow",))
        return True

    def replication_sample(self, flow: str) -> MetricsSample | None:
        """The flow's newest replication sample (None: no sampler has run for it)."""
        with self._db.read() as conn:
            return history.replication_sample(conn, flow)

    # -- artifacts ------------------------------------------------------------------------------
    def record_artifact(self, kind: str, run_id: str | None, path: str, summary: dict[str, Any]) -> Artifact:
        with self._db.write() as conn:
            return history.insert_artifact(conn, kind, run_id, path, summary)

    def artifacts(self, kind: str | None = None, run_id: str | None = None) -> list[Artifact]:
        """Oldest first."""
        with self._db.read() as conn:
            return [history.to_artifact(r) for r in conn.execute(history.artifacts_query(kind, run_id))]


def _lock_event(action: str, flow: str, before: LockHolder, after: LockHolder | None, user: str | None,
                reason: str) -> AuditEvent:
    run = after or before
    return AuditEvent(action=action, kind="step", result="ok", mutating=False, flow=flow, run_id=run.run_id,
                      dag_id=run.dag_id, user=user, state_before={"holder": before.model_dump(mode="json")},
                      state_after={"holder": after.model_dump(mode="json") if after else None},
                      details={"reason": reason})
