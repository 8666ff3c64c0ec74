"""The audit store: a hash-chained, append-only trail of runbook steps and API calls, with snapshots for
rollback, per-flow locks, run progress, metrics history and artifacts. Framework-free (no Airflow)."""

from mirrorbook.audit.errors import (AuditConfigError, AuditError, AuditIntegrityError, AuditUnavailable,
                                     EventNotFound, FlowLocked, InvalidAuditData, SnapshotNotFound)
from mirrorbook.audit.models import (Artifact, AuditEvent, AuditRecord, BrokenLink, LockHolder, MetricsSample,
                                     RequestSummary, Snapshot, SnapshotInfo, VerifyResult)
from mirrorbook.audit.store import AuditStore

__all__ = [
    "AuditStore", "AuditEvent", "AuditRecord", "RequestSummary", "LockHolder", "Snapshot", "SnapshotInfo",
    "MetricsSample", "Artifact", "VerifyResult", "BrokenLink", "AuditError", "AuditConfigError",
    "AuditUnavailable", "AuditIntegrityError", "InvalidAuditData", "EventNotFound", "SnapshotNotFound",
    "FlowLocked",
]
