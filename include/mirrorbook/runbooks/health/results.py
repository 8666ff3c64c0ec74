"""What a health pass found: per group, per flow and for the whole pass — with the metrics sample each
flow leaves in the audit store and the lines, summary and alert message shown to people."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, Field

from mirrorbook.audit import AuditStore, MetricsSample
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.flows import FlowStatus
from mirrorbook.runbooks.health.loss import FlowLoss
from mirrorbook.runbooks.readiness import Readiness

HEALTH_SOURCE = "mm2_health_check"


def latest_sample(audit: AuditStore, flow: str) -> MetricsSample | None:
    """The health check's newest sample of `flow` — not a drill's (those carry no freshness, loss or target
    figures): what the next pass compares against, and what the page and the metrics show."""
    return audit.latest_metrics(flow, source=HEALTH_SOURCE)


def known_loss(audit: AuditStore, flow: str) -> dict[str, Any] | None:
    """What the health check knows of `flow`'s lost records, for reports (failover, failback, drill): None when
    it has never sampled the flow. Records lost so far per cause and partition, and the gaps it last saw."""
    sample = latest_sample(audit, flow)
    if sample is None:
        return None
    loss = FlowLoss.from_sample(sample.metrics)
    known = {"flow": flow, "sampled_at": sample.observed_at.isoformat(), "records": loss.total(),
            "data_loss": loss.total("data_loss"), "target_reset": loss.total("target_reset"),
            "partitions": [r.model_dump(mode="json") for r in loss.ledger],
            "gaps_now": [g.model_dump() | {"records": g.records} for g in loss.gaps],
            "basis": "the health check's ledger of records deleted from the source before MM2 replicated them "
                     "(DATA_LOSS) and of copies gone from the target by a truncated or re-created topic "
                     "(TARGET_RESET), as of its sample at " + sample.observed_at.isoformat()}
    return known | {"text": _render_known_loss(known)}


def _render_known_loss(known: dict[str, Any]) -> str:
    """`known_loss` in one line, as reports show it."""
    if not known["records"] and not known["gaps_now"]:
        return f"known loss on {known['flow']}: none (health check, as of {known['sampled_at']})"
    parts = ", ".join(f"{r['topic']}-{r['partition']} {r['records']} ({r['cause']})" for r in known["partitions"][:10])
    return (f"known loss on {known['flow']} (health check, as of {known['sampled_at']}): "
            f"{known['records']} record(s) — "
            f"{known['data_loss']} deleted from the source before MM2 replicated them (DATA_LOSS), "
            f"{known['target_reset']} copies gone from the target (TARGET_RESET)" + (f": {parts}" if parts else "")
            + (f"; a gap still open on {len(known['gaps_now'])} partition(s)" if known["gaps_now"] else ""))


class GroupCheckpointHealth(BaseModel):
    group: str
    newest_at: datetime | None = None  # record timestamp of the group's newest checkpoint
    age_s: float | None = None
    behind: list[str] = Field(default_factory=list)  # source partitions committed past the newest checkpoint
    behind_since: datetime | None = None

    def behind_for_s(self, now: datetime) -> float | None:
        return (now - self.behind_since).total_seconds() if self.behind and self.behind_since else None

    def sample(self, now: datetime) -> dict[str, Any]:
        return {"group": self.group, "newest_at": iso(self.newest_at), "age_s": _round(self.age_s),
                "behind": self.behind[:20], "behind_since": iso(self.behind_since),
                "behind_for_s": _round(self.behind_for_s(now))}


class FlowHealth(BaseModel):
    flow: str
    source: str
    target: str
    status: FlowStatus
    heartbeat_at: datetime | None = None
    heartbeat_age_s: float | None = None
    heartbeat_lookback_s: float
    checkpoints: list[GroupCheckpointHealth] = Field(default_factory=list)
    hops: int | None = None
    lock_holder: str | None = None
    problems: list[str] = Field(default_factory=list)  # reads that failed (they make the flow unhealthy)
    restarted: list[str] = Field(default_factory=list)
    violations: list[str] = Field(default_factory=list)
    readiness: Readiness | None = None
    loss: FlowLoss | None = None  # DATA_LOSS and TARGET_RESET found, and the records lost so far
    # The managed groups' committed offsets the pass read on the source (None: unreadable); readiness input.
    committed: dict[str, dict[TP, int]] | None = Field(default=None, exclude=True)

    def metrics(self, now: datetime) -> dict[str, Any]:
        """FlowStatus.metrics() (its `partitions` rows feed the RPO estimate) plus freshness and verdict."""
        ages = [c.age_s for c in self.checkpoints if c.age_s is not None]
        return {**self.status.metrics(), "source": HEALTH_SOURCE,
                "heartbeat_at": iso(self.heartbeat_at), "heartbeat_age_s": _round(self.heartbeat_age_s),
                # a list, not a dict keyed by group: the audit store masks values under secret-looking keys
                "checkpoints": [c.sample(now) for c in self.checkpoints],
                "checkpoint_age_s_max": _round(max(ages, default=None)),
                "hops": self.hops, "problems": self.problems, "restarted": self.restarted,
                "violations": self.violations,
                "readiness": self.readiness.sample() if self.readiness else None,
                **(self.loss.sample() if self.loss else {})}

    def summary(self) -> dict[str, Any]:
        return {"flow": self.flow, "state": self.status.state.value, "max_lag": self.status.max_lag,
                "total_lag": self.status.total_lag, "heartbeat_age_s": _round(self.heartbeat_age_s),
                "checkpoint_age_s": {c.group: _round(c.age_s) for c in self.checkpoints}, "hops": self.hops,
                "restarted": self.restarted, "violations": self.violations,
                "readiness": self.readiness.sample() if self.readiness else None,
                "records_lost": self.loss.total() if self.loss else None}


class HealthReport(BaseModel):
    observed_at: datetime
    elapsed_s: float
    flows: list[FlowHealth]

    @property
    def ok(self) -> bool:
        return not self.violations()

    def violations(self) -> list[str]:
        return [v for f in self.flows for v in f.violations]

    def summary(self) -> dict[str, Any]:
        return {"observed_at": iso(self.observed_at), "elapsed_s": round(self.elapsed_s, 3), "ok": self.ok,
                "flows": [f.summary() for f in self.flows]}

    def message(self) -> str:
        bad = sorted({f.flow for f in self.flows if f.violations})
        head = f"{len(bad)} of {len(self.flows)} flow(s) unhealthy ({', '.join(bad)})"
        return "\n".join([head, *(f"- {v}" for v in self.violations())])

    def lines(self) -> list[str]:
        out = []
        for f in self.flows:
            cp = ", ".join(f"{c.group} {fmt_s(c.age_s)}" for c in f.checkpoints[:10]) or "none"
            out.append(f"{f.flow}: {f.status.state.value}, lag max {f.status.max_lag} total {f.status.total_lag}, "
                       f"heartbeat {fmt_s(f.heartbeat_age_s)}, hops {f.hops}, checkpoints: {cp}"
                       + (f"; restarted: {'; '.join(f.restarted)}" if f.restarted else "")
                       + ("" if not f.violations else f"  -> {len(f.violations)} violation(s)"))
            if f.readiness is not None:
                r = f.readiness
                out.append(f"{f.flow}: readiness not refreshed: {r.error}" if r.error else
                           f"{f.flow}: failover readiness {r.positions}/{r.group_partitions} group-partitions "
                           f"({r.exact} proven, {r.recomputed} re-proven, {r.changed} changed); an unplanned "
                           f"failover now re-reads at most {r.reread_max} records, skips 0")
            if f.loss is not None:
                out += f.loss.lines(f.flow)
        return out


def iso(dt: datetime | None) -> str | None:
    return dt.isoformat() if dt else None


def _round(v: float | None) -> float | None:
    return round(v, 3) if v is not None else None


def fmt_s(v: float | None) -> str:
    return "none" if v is None else f"{v:.1f}s"


def at_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, timezone.utc)
