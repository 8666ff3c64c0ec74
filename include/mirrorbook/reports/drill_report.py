"""The DR drill report: its data (`DrillSummary`, stored as JSON) and its HTML rendering with inline SVG
charts — lag timeline, offsets before/after per group, step timeline. The HTML is self-contained
(no scripts, no external resources), so it can be archived as audit evidence as is.

It stays readable at a thousand groups (150,000 group-partitions): the figures and each group's totals come
first, the groups that skipped, were not written or re-read most on top; the chart shows the partitions to look
at first; each listed group's partitions fold away (<details>); and what the page lists is bounded — the rest is
in the JSON beside it, which keeps every partition.
"""

from __future__ import annotations

import heapq
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from mirrorbook.bounds import listed
from mirrorbook.redaction import redact, redact_text
from mirrorbook.reports.html import chart, environment
from mirrorbook.reports.svg import Bar, Marker, Series, bar_chart, line_chart, timeline

ARTIFACT_KIND = "drill-report"
TEMPLATE = "drill.html"
# What the page lists at most (a thousand groups' drill would otherwise be 150,000 table rows and as many bars):
LISTED_GROUPS = 50  # groups in the summary table
DETAIL_GROUPS = 20  # of those, the first, each with its partitions folded under it
DETAIL_ROWS = 50  # partitions under each of them
CHART_BARS = 30  # partitions in the offsets chart
LISTED_PROBLEMS = 20
_templates = environment()


class PartitionOutcome(BaseModel):
    """One group on one partition: where it stood on A, where it resumed on B, and what that cost."""

    group: str
    source_topic: str
    target_topic: str
    partition: int
    a_next: int            # next seq the group would have read on A (its committed offset; seq == offset on A)
    a_high: int            # records produced up to the cutover (high watermark on A)
    b_offset: int | None   # offset written on B
    b_first_seq: int | None = None
    read_on_b: int = 0
    re_read: int = 0       # records read on B the group had already read on A
    skipped: int = 0       # records after its position on A it never read on B
    duplicates: int = 0    # the same record read twice on B (replication duplicates)


class StepTiming(BaseModel):
    step: str
    task_id: str | None
    result: str
    started_at: datetime
    ended_at: datetime

    @property
    def duration_s(self) -> float:
        return (self.ended_at - self.started_at).total_seconds()


class LagPoint(BaseModel):
    at: datetime
    flow_lag: int                  # data partitions, by the source connector's committed offsets
    canary_lag: int                # the canary topics' share of it
    canary_backlog: int | None     # canary records on A not yet on B (drill samples only)
    source: str | None = None      # dr_drill | mm2_health_check


class LagBeforeCutover(BaseModel):
    canary_backlog: int | None = None
    flow_lag: int | None = None
    flow_max_partition_lag: int | None = None


class DrillSummary(BaseModel):
    run_id: str
    flow: str
    from_cluster: str
    to_cluster: str
    translation: str
    topics: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)
    started_at: datetime | None = None
    steady_at: datetime | None = None
    cutover_at: datetime | None = None
    resumed_at: datetime | None = None
    finished_at: datetime
    rto_s: float | None = None
    failover_s: float | None = None
    skipped: int | None = None
    re_read: int | None = None
    duplicates: int | None = None
    produced: int | None = None
    consumed_on_a: int | None = None
    consumed_on_b: int | None = None
    lag_before_cutover: LagBeforeCutover = Field(default_factory=LagBeforeCutover)
    plan: dict[str, Any] | None = None
    partitions: list[PartitionOutcome] = Field(default_factory=list)
    steps: list[StepTiming] = Field(default_factory=list)
    lag_timeline: list[LagPoint] = Field(default_factory=list)
    flow_state_before: str | None = None
    flow_state_after: str | None = None
    restored: str = "not run"
    known_loss: dict[str, Any] | None = None  # what the health check knows the flow lost (runbooks/health)
    ok: bool = False
    problems: list[str] = Field(default_factory=list)

    def artifact_summary(self, json_path: Path) -> dict[str, Any]:
        """What the audit lists for the drill (and the plugin's drills page shows)."""
        return {"rto_s": self.rto_s, "skipped": self.skipped, "re_read": self.re_read, "json": str(json_path),
                "flow": self.flow, "ok": self.ok, "failover_s": self.failover_s,
                "lag_before_cutover": self.lag_before_cutover.canary_backlog, "restored": self.restored,
                "records_lost": self.known_loss["records"] if self.known_loss else None}


# -- per group --------------------------------------------------------------------------------------

class GroupOutcome(BaseModel):
    """One group's partitions summed; `partitions_shown`: its partitions to look at first (the page's detail)."""

    group: str
    partitions: int
    unwritten: int  # partitions with no offset written on the target
    skipped: int
    duplicates: int
    re_read: int
    read_on_b: int
    partitions_shown: list[PartitionOutcome] = Field(default_factory=list)


def _first_to_look_at(p: PartitionOutcome) -> tuple[int, bool, int, int, str, int]:
    return -p.skipped, p.b_offset is not None, -p.duplicates, -p.re_read, p.source_topic, p.partition


def group_outcomes(partitions: list[PartitionOutcome], detail_groups: int = DETAIL_GROUPS,
                   detail_rows: int = DETAIL_ROWS) -> list[GroupOutcome]:
    """Every group's totals, those to look at first on top (skips, then partitions with no offset written,
    duplicates, re-reads; then by name); the first `detail_groups` carry their first `detail_rows` partitions,
    in the same order."""
    by_group: dict[str, list[PartitionOutcome]] = {}
    for p in partitions:
        by_group.setdefault(p.group, []).append(p)
    out = [GroupOutcome(group=g, partitions=len(ps), unwritten=sum(p.b_offset is None for p in ps),
                        skipped=sum(p.skipped for p in ps), duplicates=sum(p.duplicates for p in ps),
                        re_read=sum(p.re_read for p in ps), read_on_b=sum(p.read_on_b for p in ps))
           for g, ps in by_group.items()]
    out.sort(key=lambda g: (-g.skipped, -g.unwritten, -g.duplicates, -g.re_read, g.group))
    for g in out[:detail_groups]:
        g.partitions_shown = heapq.nsmallest(detail_rows, by_group[g.group], key=_first_to_look_at)
    return out


# -- charts ----------------------------------------------------------------------------------------

def _t(summary: DrillSummary, at: datetime | None) -> float | None:
    """Seconds since the drill's first step (or its canary, when no step is known)."""
    starts = [t for t in (summary.started_at, *(st.started_at for st in summary.steps[:1])) if t]
    return (at - min(starts)).total_seconds() if at and starts else None


def lag_chart(s: DrillSummary) -> str:
    pts = [(_t(s, p.at), p) for p in s.lag_timeline]
    series = [Series("flow lag (records)", [(x, p.flow_lag) for x, p in pts if x is not None]),
              Series("canary lag", [(x, p.canary_lag) for x, p in pts if x is not None]),
              Series(f"canary records not yet on {s.to_cluster}",
                     [(x, p.canary_backlog) for x, p in pts if x is not None and p.canary_backlog is not None])]
    markers = [Marker(x, label) for label, at in (("steady", s.steady_at), ("cutover", s.cutover_at),
                                                  (f"reading on {s.to_cluster}", s.resumed_at))
               if (x := _t(s, at)) is not None]
    return line_chart(series, markers=markers, title=f"Replication lag of {s.flow} (metrics history)",
                      x_label="seconds since the drill started", y_label="records")


def offsets_chart(s: DrillSummary) -> str:
    shown = heapq.nsmallest(CHART_BARS, s.partitions, key=_first_to_look_at)
    bars = [Bar(f"{p.group} {p.source_topic}-{p.partition}", [p.a_next, p.b_offset],
                [f"re-read {p.re_read}", f"skipped {p.skipped}"]) for p in shown]
    title = ("Each group's offsets before and after the cutover, per partition" if len(shown) == len(s.partitions)
             else f"Offsets before and after the cutover: the {len(shown)} of {len(s.partitions)} partitions that "
                  "skipped, were not written or re-read most")
    return bar_chart(bars, [f"committed on {s.from_cluster} (before)", f"written on {s.to_cluster} (after)"],
                     title=title)


def steps_chart(s: DrillSummary) -> str:
    rows = [(f"{st.step}", _t(s, st.started_at) or 0.0, _t(s, st.ended_at) or 0.0, st.result) for st in s.steps]
    return timeline(rows, title="Step timeline")


# -- HTML ------------------------------------------------------------------------------------------

def render_html(s: DrillSummary, json_name: str) -> str:
    facts = [("canary topics", listed(s.topics)), ("canary groups", listed(s.groups)),
             ("records produced on " + s.from_cluster, s.produced),
             ("records consumed on " + s.from_cluster, s.consumed_on_a),
             ("records consumed on " + s.to_cluster, s.consumed_on_b), ("steady replication at", s.steady_at),
             ("cutover (consumers stopped on " + s.from_cluster + ")", s.cutover_at),
             ("consumers reading on " + s.to_cluster, s.resumed_at),
             ("flow lag before the cutover, by the source connector's committed offsets (records)",
              s.lag_before_cutover.flow_lag),
             ("translation plan", json.dumps(s.plan) if s.plan else None),
             ("flow state before / after", f"{s.flow_state_before} / {s.flow_state_after}"),
             ("restore", s.restored),
             ("records the flow lost before replication (health check)",
              s.known_loss["text"] if s.known_loss else "not known: no health check sampled the flow")]
    charts = {"lag": chart(lag_chart(s)), "offsets": chart(offsets_chart(s)), "steps": chart(steps_chart(s))}
    groups = group_outcomes(s.partitions)
    return _templates.get_template(TEMPLATE).render(
        s=s, json_name=json_name, facts=facts, charts=charts, steps=[(st, _t(s, st.started_at)) for st in s.steps],
        groups=groups[:LISTED_GROUPS], groups_hidden=max(0, len(groups) - LISTED_GROUPS),
        detail=[g for g in groups if g.partitions_shown], problems=s.problems[:LISTED_PROBLEMS],
        problems_hidden=max(0, len(s.problems) - LISTED_PROBLEMS))


def write_report(s: DrillSummary, out_dir: Path, stem: str) -> tuple[Path, Path]:
    """`<stem>.json` (the data) and `<stem>.html` (the report), side by side. Both are archived as
    evidence: the free text in them (problems carry client errors) is scrubbed of credentials first."""
    s = s.model_copy(update={"problems": [redact_text(p) for p in s.problems], "plan": redact(s.plan)})
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, html_path = out_dir / f"{stem}.json", out_dir / f"{stem}.html"
    json_path.write_text(s.model_dump_json(indent=2))
    html_path.write_text(render_html(s, json_path.name))
    return html_path, json_path


def load_summary(json_path: Path) -> DrillSummary:
    return DrillSummary.model_validate_json(json_path.read_text())
