"""Audit store failures. Each names what went wrong and, where there is one, the fix."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mirrorbook.bounds import cut
from mirrorbook.errors import MirrorbookError

if TYPE_CHECKING:
    from mirrorbook.audit.models import LockHolder


class AuditError(MirrorbookError):
    pass


class AuditConfigError(AuditError):
    """The audit URL names no backend we support, or its driver is missing."""


class AuditUnavailable(AuditError):
    """The database cannot be reached, or stayed locked longer than the busy timeout."""


class AuditIntegrityError(AuditError):
    """Stored audit data contradicts itself (a missing head row, a snapshot whose digest changed)."""


class InvalidAuditData(AuditError):
    """A value the store was asked to write is not plain JSON (it could not be read back exactly)."""


class EventNotFound(AuditError):
    pass


class SnapshotNotFound(AuditError):
    pass


class FlowLocked(AuditError):
    """Another run holds the flow: one runbook per flow at a time."""

    def __init__(self, flow: str, holder: "LockHolder") -> None:
        super().__init__(f"flow {cut(flow)} is locked by {holder.describe()}",
                         "wait for that run to finish (a run that died is taken over by the next one once "
                         f"Airflow marks it failed); to release it now: mirrorbook audit unlock '{cut(flow)}'")
        self.flow = flow
        self.holder = holder
