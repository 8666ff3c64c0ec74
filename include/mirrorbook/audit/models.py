"""The store's boundary: what callers pass in and what they get back, as pydantic models."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, PlainSerializer, model_validator

from mirrorbook.audit.codec import format_time, to_utc, utf8_tree, utcnow

Kind = Literal["step", "call"]
# "intent": a mutating call about to be made (write-ahead); its outcome follows as ok or error.
Result = Literal["ok", "noop", "planned", "refused", "error", "intent"]
# Results of events that changed (or may have changed) something; planned/noop/refused changed nothing.
CHANGING_RESULTS: tuple[Result, ...] = ("ok", "error")
# Serialized in the store's own fixed-width form, so exports match what was hashed.
UtcDatetime = Annotated[AwareDatetime, AfterValidator(to_utc), PlainSerializer(format_time, when_used="json")]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Recorded(_Model):
    """What a caller reports, to be recorded whatever it holds. pydantic refuses a lone surrogate in a str
    field: those are escaped before validation, as the store would store them. The rest (NUL, length)
    is left to the store, which tags what it changes so distinct values stay distinct (codec.py)."""

    @model_validator(mode="before")
    @classmethod
    def _utf8(cls, data: Any) -> Any:
        return utf8_tree(data) if isinstance(data, dict) else data


class RequestSummary(_Recorded):
    """An API call as the audit shows it: never the raw body, a summary of it (the store redacts it anyway)."""

    method: str
    path: str
    body: dict[str, Any] | None = None
    status: int | None = None


class AuditEvent(_Recorded):
    """One runbook step or one API call, as a caller reports it. `ended_at` defaults to the append time."""

    action: str = Field(min_length=1, description='e.g. "connector.stop", "offsets.alter", "step.precheck"')
    kind: Kind
    result: Result
    mutating: bool = False
    run_id: str | None = None
    dag_id: str | None = None
    task_id: str | None = None
    user: str | None = Field(default=None, description="who triggered the run")
    flow: str | None = Field(default=None, description='e.g. "A->B"')
    request: RequestSummary | None = None
    state_before: Any = None
    state_after: Any = None
    error: str | None = None
    started_at: UtcDatetime = Field(default_factory=utcnow)
    ended_at: UtcDatetime | None = None
    snapshot_id: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    event_id: str | None = Field(default=None, description="assigned by the store when absent")


class AuditRecord(AuditEvent):
    """A stored event: its position in the chain and the hashes that link it."""

    event_id: str
    seq: int
    ended_at: UtcDatetime
    prev_hash: str
    hash: str

    @model_validator(mode="before")
    @classmethod
    def _utf8(cls, data: Any) -> Any:
        return data  # read back from the store: escaped already (a walk per record would only cost)


class LockHolder(_Model):
    """Who holds a flow's lock. The same `run_id` re-acquires (task retries); anyone else is refused.
    Not escaped like an event: a run id no database could store (a lone surrogate) is refused, not
    recorded in a form another run id could share."""

    run_id: str
    dag_id: str | None = None
    user: str | None = None
    acquired_at: UtcDatetime = Field(default_factory=utcnow)

    def describe(self) -> str:
        return (f"run {self.run_id} of DAG {self.dag_id or '?'} (triggered by {self.user or '?'}) "
                f"since {format_time(self.acquired_at)}")


class OpenIntent(_Model):
    """A mutating call recorded as about to be made whose outcome was never recorded."""

    event_id: str
    flow: str | None
    run_id: str
    task_id: str | None
    action: str
    expect: dict[str, Any] = Field(description="what the call leaves in place, as the runbook can check it")
    created_at: UtcDatetime


class SnapshotInfo(_Model):
    snapshot_id: str
    kind: str
    flow: str | None
    subject: str
    run_id: str | None
    note: str | None
    created_at: UtcDatetime
    size: int = Field(description="bytes of the stored JSON payload")
    payload_sha256: str


class Snapshot(SnapshotInfo):
    """What a mutation overwrote, kept so the run can be rolled back exactly."""

    payload: dict[str, Any]


class MetricsSample(_Model):
    flow: str
    observed_at: UtcDatetime
    metrics: dict[str, Any]


class GroupPosition(_Model):
    """Where a group would resume on a flow's target: `target_offset` for its committed `source_offset`,
    established (`exact`: proven by content) at `observed_at` while the source was readable."""

    group: str
    topic: str              # on the target
    partition: int
    source_topic: str
    source_offset: int
    target_offset: int
    rule: str               # precise:<proof> | fallback:<checkpoint|offset-sync|earliest>
    exact: bool
    observed_at: UtcDatetime

    @property
    def key(self) -> tuple[str, str, int]:
        return self.group, self.topic, self.partition


class Artifact(_Model):
    artifact_id: int
    kind: str
    run_id: str | None
    path: str
    summary: dict[str, Any]
    created_at: UtcDatetime


class BrokenLink(_Model):
    """The first place where the stored trail contradicts its own hashes."""

    reason: str
    seq: int | None = None
    event_id: str | None = None
    snapshot_id: str | None = None

    def describe(self) -> str:
        where = []
        if self.event_id:
            where.append(f"event {self.event_id}")
        if self.seq is not None:
            where.append(f"seq {self.seq}")
        if self.snapshot_id:
            where.append(f"snapshot {self.snapshot_id}")
        return f"{' '.join(where) or 'chain head'}: {self.reason}"


class ChainHead(_Model):
    """Where the chain ends (the head row), and which store it is: the hash of its first event, fixed once
    the store holds anything, whatever URL reaches it (rewriting it breaks every later link)."""

    seq: int
    hash: str
    updated_at: UtcDatetime
    store: str | None = Field(description="hash of event seq 1; None while the store is empty")


class VerifyResult(_Model):
    ok: bool
    checked: int = Field(description="events whose hashes were checked")
    snapshots_checked: int = 0
    head_count: int | None = Field(default=None, description="events the head row says were written")
    broken: BrokenLink | None = None

    def summary(self) -> str:
        if self.ok:
            return f"audit trail OK: {self.checked} events chained, {self.snapshots_checked} snapshots intact"
        assert self.broken is not None
        return f"audit trail BROKEN after {self.checked} events checked: {self.broken.describe()}"
