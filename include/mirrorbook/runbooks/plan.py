"""The translation plan a failover or failback writes: which offset each (group, partition) gets on
the new cluster, how it was obtained, and how many records the group re-reads or would skip.

The plan is computed once per run and kept in the audit's run progress (not XCom), so a cleared
and re-run task writes exactly the same offsets.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any, Iterable, NamedTuple, Sequence

from pydantic import BaseModel, Field

from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.counts import ZERO, Count, total
from mirrorbook.mm2.precise import Marks, PartitionTranslation, PreciseReport, whole_history
from mirrorbook.mm2.remote_cluster_utils import group_matcher

# Groups that are plumbing, never application consumers (MM2's own groups.exclude, plus ours).
INTERNAL_GROUPS = re.compile(r"^(console-consumer-.*|connect-.*|__.*|mirrorbook-reader-.*|mirrorbook-connect-.*)$")


class PlanRow(BaseModel):
    group: str
    source_topic: str          # where the group consumed (on the cluster it leaves)
    target_topic: str          # where it will consume (on the cluster it moves to)
    partition: int
    source_offset: int | None  # its committed offset on the cluster it leaves (None: unknown, unplanned)
    offset: int                # what is written on the new cluster
    method: str                # precise:<rule> | mm2 | reverse:<rule> | fallback:<checkpoint|offset-sync|earliest>
    mm2_offset: int | None = None
    precise_offset: int | None = None
    re_read: Count = ZERO      # records the group reads again from `offset`: exact, or bounded
    skip: Count = ZERO         # records the group would never read from `offset` (must be 0)
    basis_age_s: float | None = None  # how old the knowledge behind `offset` is: unplanned, or a reused readiness proof
    note: str | None = None

    @property
    def target_tp(self) -> TP:
        return TP(self.target_topic, self.partition)


class PlannedOffsets(NamedTuple):
    """What writing and reading back a plan needs of it: the offset of each (group, target partition)."""

    to_cluster: str
    groups: list[str]
    rows: list[tuple[str, str, int, int]]  # group, target topic, partition, offset

    def offsets(self) -> dict[str, dict[TP, int]]:
        out: dict[str, dict[TP, int]] = {g: {} for g in self.groups}
        for g, t, p, o in self.rows:
            out.setdefault(g, {})[TP(t, p)] = o
        return {g: o for g, o in out.items() if o}

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> PlannedOffsets:
        """From the plan as the run's progress keeps it, without making a row of it."""
        if data.get("format") != STORED_FORMAT:
            return TranslationPlan.from_stored(data).planned()
        texts, cols = data["texts"], data["columns"]
        return cls(data["to_cluster"], data["groups"],
                   [(texts[g], texts[t], p, o) for g, t, p, o in zip(cols["group"], cols["target_topic"],
                                                                     cols["partition"], cols["offset"])])


STORED_FORMAT = 2
_TEXT_COLUMNS = ("group", "source_topic", "target_topic", "method", "note")
_NUMBER_COLUMNS = ("partition", "source_offset", "offset", "mm2_offset", "precise_offset", "basis_age_s")
_COUNT_COLUMNS = ("re_read", "skip")
_COLUMNS = (*_TEXT_COLUMNS, *_NUMBER_COLUMNS, *(f"{c}_{end}" for c in _COUNT_COLUMNS for end in ("low", "high")))


class TranslationPlan(BaseModel):
    flow: str
    direction: str  # "failover" | "failback"
    mode: str
    translation: str
    from_cluster: str
    to_cluster: str
    groups: list[str]
    rows: list[PlanRow]
    computed_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    notes: list[str] = Field(default_factory=list)

    def offsets(self) -> dict[str, dict[TP, int]]:
        return self.planned().offsets()

    def planned(self) -> PlannedOffsets:
        return PlannedOffsets(self.to_cluster, self.groups, [(r.group, r.target_topic, r.partition, r.offset)
                                                             for r in self.rows])

    # -- as the run's progress keeps it ------------------------------------------------------------
    def stored(self) -> dict[str, Any]:
        """The plan as the audit store keeps it: its rows column by column (`to_columns`). A thousand groups' plan
        is 150,000 rows: as one object per row, with every string escaped and checked for secrets on the way in,
        it took a minute to store and seconds for each task to read back; this way there are a few hundred
        strings and plain lists of numbers."""
        return {"format": STORED_FORMAT, **self.model_dump(mode="json", exclude={"rows"}), **to_columns(self.rows)}

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> TranslationPlan:
        if data.get("format") != STORED_FORMAT:  # kept by a release that stored one object per row
            return cls.model_validate(data)
        meta = {k: v for k, v in data.items() if k not in ("format", "texts", "columns")}
        return cls.model_validate({**meta, "rows": []}).model_copy(update={"rows": from_columns(data)})

    def totals(self) -> dict[str, Any]:
        return totals(self.rows)

    def skipping(self) -> list[PlanRow]:
        """Rows whose offset may start past records the group has not read."""
        return [r for r in self.rows if r.skip.may_be_positive]

    def skipping_text(self, limit: int = 20) -> str:
        """The skipping rows as an operator reads them: where each group is, where it would start, what it skips."""
        rows = self.skipping()
        text = "; ".join(
            f"{r.group} {r.target_topic}-{r.partition}: committed "
            f"{'unknown' if r.source_offset is None else r.source_offset} on {self.from_cluster}, starts at "
            f"{r.offset} on {self.to_cluster}, skips {r.skip} record(s) ({r.method})" for r in rows[:limit])
        return text + (f" (+{len(rows) - limit} more)" if len(rows) > limit else "")


def _count(items: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in items:
        out[i] = out.get(i, 0) + 1
    return dict(sorted(out.items()))


def totals(rows: Sequence[PlanRow]) -> dict[str, Any]:
    """Sums that stay honest: `re_read`/`skipped` are exact when `*_max` equals them; `bounded` rows
    contribute a range (`*_max` None: no upper bound known)."""
    re_read, skip = total(r.re_read for r in rows), total(r.skip for r in rows)
    return {
        "groups": len({r.group for r in rows}),
        "partitions": len(rows),
        "re_read": re_read.low, "re_read_max": re_read.high,
        "skipped": skip.low, "skipped_max": skip.high,
        "bounded": sum(not (r.re_read.is_exact and r.skip.is_exact) for r in rows),
        "methods": _count(r.method for r in rows),
    }


class GroupTotals(BaseModel):
    """One group's share of a plan: what a report lists before any row, the groups to look at first on top."""

    group: str
    partitions: int
    re_read: int
    re_read_max: int | None  # None: no upper bound known
    skipped: int
    skipped_max: int | None
    bounded: int  # rows counted as a range, not exactly
    methods: dict[str, int]
    noted: int  # rows with a note (why the row is not the proven position)
    note: str | None = None  # the group's first note, as an example


def _unbounded_first(high: int | None) -> float:
    return float("inf") if high is None else high


def group_totals(rows: Iterable[PlanRow]) -> list[GroupTotals]:
    """Each group's totals, the ones an SRE must read first on top: those that may skip (most first, an
    uncounted skip before any count), then those with notes, then the most re-read; then by name."""
    by_group: dict[str, list[PlanRow]] = {}
    for r in rows:
        by_group.setdefault(r.group, []).append(r)
    out = [GroupTotals(group=g, noted=sum(r.note is not None for r in rs),
                       note=next((r.note for r in rs if r.note is not None), None),
                       **{k: v for k, v in totals(rs).items() if k != "groups"})
           for g, rs in by_group.items()]
    out.sort(key=lambda t: (-_unbounded_first(t.skipped_max), -t.skipped, -t.noted,
                            -_unbounded_first(t.re_read_max), -t.re_read, t.group))
    return out


# -- the rows column by column: the run's progress and the report file keep them so -------------------------
def to_columns(rows: Iterable[PlanRow]) -> dict[str, Any]:
    """`{"texts": [...], "columns": {field: [...]}}`: one list per field, text as indexes into one table of
    distinct strings (a plan repeats a few hundred names over 150,000 rows), a count as its low and high."""
    texts: dict[str, int] = {}
    columns: dict[str, list[Any]] = {c: [] for c in _COLUMNS}
    for r in rows:
        for c in _TEXT_COLUMNS:
            value = getattr(r, c)
            columns[c].append(None if value is None else texts.setdefault(value, len(texts)))
        for c in _NUMBER_COLUMNS:
            columns[c].append(getattr(r, c))
        for c in _COUNT_COLUMNS:
            count = getattr(r, c)
            columns[f"{c}_low"].append(count.low)
            columns[f"{c}_high"].append(count.high)
    return {"texts": list(texts), "columns": columns}


def from_columns(data: dict[str, Any], limit: int | None = None) -> list[PlanRow]:
    """The rows `to_columns` made, back (the first `limit` of them: a report lists a few)."""
    texts, cols = data["texts"], data["columns"]
    if limit is not None:
        cols = {c: v[:limit] for c, v in cols.items()}
    return [PlanRow(**{c: None if v is None else texts[v] for c, v in zip(_TEXT_COLUMNS, t)},
                    **dict(zip(_NUMBER_COLUMNS, n)),
                    re_read=Count.kept(*rr), skip=Count.kept(*sk))
            for t, n, rr, sk in zip(zip(*(cols[c] for c in _TEXT_COLUMNS)),
                                    zip(*(cols[c] for c in _NUMBER_COLUMNS)),
                                    zip(cols["re_read_low"], cols["re_read_high"]),
                                    zip(cols["skip_low"], cols["skip_high"]))]


def managed_groups(admin: KafkaAdmin, regex: str) -> list[str]:
    """Application consumer groups on a cluster matching `regex` (whole-id match, like MM2's `groups`)."""
    matches = group_matcher(regex)
    return sorted(g for g in admin.list_groups() if matches(g) and not INTERNAL_GROUPS.match(g))


def rows_from_precise(report: PreciseReport | Iterable[PartitionTranslation], translation: str) -> list[PlanRow]:
    """Precise mode writes the proven offset, else the highest position that provably skips nothing (else the
    target's log start, its skip counted); mm2 mode writes MM2's checkpoint, else that same fallback. Every
    row's skip is counted or bounded, and a row that may skip says why, so the plan's gate can refuse it."""
    rows = []
    for r in report.rows if isinstance(report, PreciseReport) else report:
        if translation == "precise" and r.proven:
            offset, method, re_read, skip, note = r.offset, f"precise:{r.proof}", r.re_read, r.skip, None
        elif translation == "mm2" and r.mm2_offset is not None:
            offset, method, re_read, skip = r.mm2_offset, "mm2", r.mm2_re_read or ZERO, r.mm2_skip or ZERO
            note = (f"{r.why_skips(offset, skip)}: MM2's checkpoint skips {skip} record(s)"
                    if skip.may_be_positive else None)
        else:
            offset, method = r.fallback_offset, f"fallback:{r.fallback_rule}"
            re_read, skip = r.fallback_re_read or ZERO, r.fallback_skip or ZERO
            why = f"not proven ({r.reason})" if translation == "precise" else "no MM2 checkpoint"
            how = (f"{r.why_skips(offset, skip)}, so no position on the target skips nothing: it skips {skip} "
                   "record(s)" if skip.may_be_positive else FALLBACK_NOTES[r.fallback_rule or "earliest"])
            note = f"{why}: {how}"
        # Built without validation: every value comes from a validated row (a plan can have a million rows).
        rows.append(PlanRow.model_construct(
            group=r.group, source_topic=r.source_topic, target_topic=r.target_topic, partition=r.partition,
            source_offset=r.source_offset, offset=offset, method=method, mm2_offset=r.mm2_offset,
            precise_offset=r.precise_offset, re_read=re_read, skip=skip, basis_age_s=None, note=note))
    return rows


FALLBACK_NOTES = {
    "checkpoint": "MM2's checkpoint, made at or before the group's offset (re-reads, never skips)",
    "offset-sync": "MM2's offset-syncs: the newest sync at or below the group's offset (re-reads, never skips)",
    "earliest": "the partition's start on the target, which holds its whole history (re-reads everything it "
                "holds, never skips)",
}


def add_earliest_fallback(rows: list[PlanRow], wanted: dict[str, dict[TP, int | None]],
                          target_admin: KafkaAdmin) -> list[PlanRow]:
    """(group, target partition) pairs nobody could translate start at the partition's earliest offset."""
    have = {(r.group, r.target_topic, r.partition) for r in rows}
    missing = [(g, tp, src) for g, tps in wanted.items() for tp, src in tps.items()
               if (g, tp.topic, tp.partition) not in have]
    if not missing:
        return rows
    marks = target_admin.watermarks({tp for _, tp, _ in missing})
    rows.extend(earliest_row(g, tp, src, Marks(marks[tp].low, marks[tp].high)) for g, tp, src in sorted(missing))
    return rows


def earliest_row(group: str, tp: TP, source_offset: int | None, marks: Marks) -> PlanRow:
    """A pair nobody could translate, at the partition's start: the group re-reads what the new cluster holds.
    That skips nothing only when the partition holds its whole history (`whole_history`); past a log start
    that retention moved, nothing here counts what was deleted, so the skip is unknown — not 0 — and the
    plan's gate stops on it."""
    whole = whole_history(marks)
    return PlanRow(group=group, source_topic="?", target_topic=tp.topic, partition=tp.partition,
                   source_offset=source_offset, offset=marks.low, method="fallback:earliest",
                   skip=ZERO if whole else Count.between(0, None), re_read=Count.between(0, marks.high - marks.low),
                   note="no checkpoint and no proof: " + (
                       FALLBACK_NOTES["earliest"] if whole else
                       f"the partition's start on the target, {marks.low}: retention there deleted what was below "
                       "it, and nothing here tells whether the group had read it (the skip is not counted)"))
