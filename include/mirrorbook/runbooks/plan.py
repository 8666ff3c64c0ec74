"""The translation plan a failover or failback writes: which offset each (group, partition) gets on
the new cluster, how it was obtained, and how many records the group re-reads or would skip.

The plan is computed once per run and kept in the audit's run progress (not XCom), so a cleared
and re-run task writes exactly the same offsets.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from pydantic import BaseModel, Field, PrivateAttr

from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.counts import ZERO, Count
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


class RowView(NamedTuple):
    """A plan row's positions straight from the plan's columns, without an object validated per row: what a proof
    reads of 150,000 rows at a thousand groups, where making each a PlanRow cost seconds (`TranslationPlan.views`)."""
    group: str
    source_topic: str
    target_topic: str
    partition: int
    source_offset: int | None
    offset: int
    precise_offset: int | None

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
        tps: dict[tuple[str, int], TP] = {}  # one TP per partition, shared by every group on it (see committed_offsets)
        for g, t, p, o in self.rows:
            key = (t, p)
            tp = tps.get(key)
            if tp is None:
                tp = tps[key] = TP(t, p)
            out.setdefault(g, {})[tp] = o
        return {g: o for g, o in out.items() if o}

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> PlannedOffsets:
        """From the plan as the run's progress keeps it, without making a row of it."""
        if data.get("format") not in (COLUMNS_FORMAT, STORED_FORMAT):
            return TranslationPlan.from_stored(data).planned()
        texts = data["texts"]
        cols = {c: _unpacked(data, c) for c in ("group", "target_topic", "partition", "offset")}
        return cls(data["to_cluster"], data["groups"],
                   [(texts[g], texts[t], p, o) for g, t, p, o in zip(cols["group"], cols["target_topic"],
                                                                     cols["partition"], cols["offset"])])


# How the run's progress keeps a plan: 2 — its rows column by column, one JSON list per column; 3 (now) — each
# column one text of comma-separated values: the audit store gates every value it keeps (escaping, secrets), and
# fourteen texts pass its gate in milliseconds where two million list members took seconds.
COLUMNS_FORMAT, STORED_FORMAT = 2, 3
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
    rows: list[PlanRow]  # empty when the plan was made column by column (`table`): see `all_rows`
    computed_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    notes: list[str] = Field(default_factory=list)
    # The rows column by column (`to_columns`' form), when the plan was made so (`of_table`): a planned failover at
    # ten thousand groups has a million and a half rows, made, gated and stored without an object each.
    table: dict[str, Any] | None = Field(default=None, exclude=True, repr=False)
    _columns: dict[str, Any] | None = PrivateAttr(default=None)
    _totals: dict[str, Any] | None = PrivateAttr(default=None)

    def __eq__(self, other: object) -> bool:  # the fields: what was computed once from them does not count
        return type(other) is type(self) and self.__dict__ == other.__dict__

    @classmethod
    def of_table(cls, table: PlanTable, **fields: Any) -> TranslationPlan:
        """A plan whose rows are `table`'s, sorted by group, topic and partition, kept column by column."""
        return cls(rows=[], table=table.sorted(), **fields)

    def all_rows(self) -> list[PlanRow]:
        """Every row as an object (made from the table the first time, for a plan made column by column)."""
        if self.table is not None and not self.rows:
            self.rows = from_columns(self.table)
        return self.rows

    def views(self) -> list[RowView]:
        """Every row's positions, read from the columns (see RowView)."""
        return [RowView(*row) for row in zip(*self.position_columns().values())]

    def position_columns(self) -> dict[str, list[Any]]:
        """RowView's fields column by column, each text as itself: what a proof's snapshot is made of, without a
        tuple a row. (Shared with the plan: read, never change them.)"""
        cols = self.columns()
        texts, c = cols["texts"], cols["columns"]
        return {name: [texts[i] for i in c[name]] if name in _TEXT_COLUMNS else c[name] for name in RowView._fields}

    def row_count(self) -> int:
        return len(self.columns()["columns"]["offset"])

    def offsets(self) -> dict[str, dict[TP, int]]:
        return self.planned().offsets()

    def planned(self) -> PlannedOffsets:
        cols = self.columns()
        texts, c = cols["texts"], cols["columns"]
        return PlannedOffsets(self.to_cluster, self.groups, [(texts[g], texts[t], p, o) for g, t, p, o in zip(
            c["group"], c["target_topic"], c["partition"], c["offset"])])

    # -- as the run's progress keeps it ------------------------------------------------------------
    def columns(self) -> dict[str, Any]:
        """The rows column by column (`to_columns`), made once: the plan is stored, reported and logged from them.
        (A plan's rows are final once it is computed.)"""
        if self.table is not None:
            return self.table
        if self._columns is None:
            self._columns = to_columns(self.rows)
        return self._columns

    def stored(self) -> dict[str, Any]:
        """The plan as the audit store keeps it: its rows column by column, each column one text (STORED_FORMAT).
        A thousand groups' plan is 150,000 rows: as one object per row, with every string escaped and checked for
        secrets on the way in, it took a minute to store and seconds for each task to read back; this way there
        are a few hundred strings and fourteen texts of numbers."""
        cols = self.columns()
        return {"format": STORED_FORMAT, **self.model_dump(mode="json", exclude={"rows"}), "texts": cols["texts"],
                "rows": self.row_count(), "columns": {c: _packed(v) for c, v in cols["columns"].items()}}

    @classmethod
    def from_stored(cls, data: dict[str, Any], *, rows: bool = True) -> TranslationPlan:
        """The plan the run's progress keeps. `rows=False`: kept column by column (as `of_table` makes it), no
        object per row — what its totals, a report and a re-run's log need (`all_rows` makes them if asked)."""
        if data.get("format") not in (COLUMNS_FORMAT, STORED_FORMAT):  # kept one object per row (older release)
            return cls.model_validate(data)
        meta = {k: v for k, v in data.items() if k not in ("format", "texts", "columns", "rows")}
        columns = {"texts": data["texts"], "columns": {c: _unpacked(data, c) for c in data["columns"]}}
        plan = cls.model_validate({**meta, "rows": []})
        if not rows:
            return plan.model_copy(update={"table": columns})
        return plan.model_copy(update={"rows": from_columns(columns)})

    def totals(self) -> dict[str, Any]:
        if self._totals is None:
            self._totals = column_totals(self.columns())
        return self._totals

    def skipping(self) -> list[PlanRow]:
        """Rows whose offset may start past records the group has not read."""
        c = self.columns()["columns"]
        return from_columns(self.columns(), at=[i for i, high in enumerate(c["skip_high"]) if high is None or high > 0])

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
    return column_totals(to_columns(rows))


def _sum(values: Iterable[int | None]) -> int | None:
    out = 0
    for v in values:
        if v is None:
            return None
        out += v
    return out


def column_totals(columns: dict[str, Any], at: Sequence[int] | None = None) -> dict[str, Any]:
    """`totals` of the rows `to_columns` keeps (those at `at`, else all), in one pass per column."""
    texts, c = columns["texts"], columns["columns"]
    pick = (lambda name: [c[name][i] for i in at]) if at is not None else (lambda name: c[name])  # noqa: E731
    rl, rh, sl, sh = pick("re_read_low"), pick("re_read_high"), pick("skip_low"), pick("skip_high")
    return {
        "groups": len(set(pick("group"))),
        "partitions": len(rl),
        "re_read": sum(rl), "re_read_max": _sum(rh),
        "skipped": sum(sl), "skipped_max": _sum(sh),
        "bounded": sum(a != b or x != y for a, b, x, y in zip(rl, rh, sl, sh)),
        "methods": dict(sorted((texts[m], n) for m, n in _count(pick("method")).items())),
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


def group_totals(rows: Iterable[PlanRow] | dict[str, Any]) -> list[GroupTotals]:
    """Each group's totals, the ones an SRE must read first on top: those that may skip (most first, an
    uncounted skip before any count), then those with notes, then the most re-read; then by name. `rows`: the
    rows, or their columns (`to_columns`)."""
    columns = rows if isinstance(rows, dict) else to_columns(rows)
    texts, c = columns["texts"], columns["columns"]
    by_group: dict[int, list[int]] = {}
    for i, g in enumerate(c["group"]):
        by_group.setdefault(g, []).append(i)
    notes = c["note"]
    out = [GroupTotals(group=texts[g], noted=sum(notes[i] is not None for i in at),
                       note=next((texts[notes[i]] for i in at if notes[i] is not None), None),
                       **{k: v for k, v in column_totals(columns, at).items() if k != "groups"})
           for g, at in by_group.items()]
    out.sort(key=lambda t: (-_unbounded_first(t.skipped_max), -t.skipped, -t.noted,
                            -_unbounded_first(t.re_read_max), -t.re_read, t.group))
    return out


# -- the rows column by column: the run's progress and the report file keep them so -------------------------
class PlanTable:
    """Rows added one by one, kept column by column (`to_columns`' form: text as indexes into one table of distinct
    strings, a count as its low and high) — no object per row."""

    def __init__(self) -> None:
        self.texts: dict[str, int] = {}
        self.cols: dict[str, list[Any]] = {c: [] for c in _COLUMNS}

    def _text(self, value: str | None) -> int | None:
        return None if value is None else self.texts.setdefault(value, len(self.texts))

    def add(self, group: str, source_topic: str, target_topic: str, partition: int, source_offset: int | None,
            offset: int, method: str, *, mm2_offset: int | None = None, precise_offset: int | None = None,
            re_read: Count = ZERO, skip: Count = ZERO, basis_age_s: float | None = None, note: str | None = None
            ) -> None:
        c, text = self.cols, self._text
        c["group"].append(text(group))
        c["source_topic"].append(text(source_topic))
        c["target_topic"].append(text(target_topic))
        c["method"].append(text(method))
        c["note"].append(text(note))
        c["partition"].append(partition)
        c["source_offset"].append(source_offset)
        c["offset"].append(offset)
        c["mm2_offset"].append(mm2_offset)
        c["precise_offset"].append(precise_offset)
        c["basis_age_s"].append(basis_age_s)
        c["re_read_low"].append(re_read.low)
        c["re_read_high"].append(re_read.high)
        c["skip_low"].append(skip.low)
        c["skip_high"].append(skip.high)

    def extend(self, group: Sequence[str], source_topic: Sequence[str], target_topic: Sequence[str],
               partition: Sequence[int], source_offset: Sequence[int], offset: Sequence[int], method: Sequence[str],
               precise_offset: Sequence[int | None], basis_age_s: Sequence[float | None]) -> PlanTable:
        """Many rows at once, column by column (every other field: as `add` defaults it)."""
        c, text, n = self.cols, self._text, len(offset)
        for name, values in (("group", group), ("source_topic", source_topic), ("target_topic", target_topic),
                             ("method", method)):
            index = {v: text(v) for v in dict.fromkeys(values)}  # each distinct text numbered once, in order
            c[name].extend(map(index.__getitem__, values))
        c["note"].extend([None] * n)
        for name, numbers in (("partition", partition), ("source_offset", source_offset), ("offset", offset),
                              ("precise_offset", precise_offset), ("basis_age_s", basis_age_s)):
            c[name].extend(numbers)
        c["mm2_offset"].extend([None] * n)
        for name in ("re_read_low", "re_read_high", "skip_low", "skip_high"):
            c[name].extend([0] * n)
        return self

    def add_rows(self, rows: Iterable[PlanRow]) -> PlanTable:
        for r in rows:
            self.add(r.group, r.source_topic, r.target_topic, r.partition, r.source_offset, r.offset, r.method,
                     mm2_offset=r.mm2_offset, precise_offset=r.precise_offset, re_read=r.re_read, skip=r.skip,
                     basis_age_s=r.basis_age_s, note=r.note)
        return self

    def keys(self) -> set[tuple[str, str, int]]:
        """(group, target topic, partition) of every row."""
        texts = list(self.texts)
        return {(texts[g], texts[t], p) for g, t, p in zip(self.cols["group"], self.cols["target_topic"],
                                                          self.cols["partition"])}

    def columns(self) -> dict[str, Any]:
        return {"texts": list(self.texts), "columns": self.cols}

    def sorted(self) -> dict[str, Any]:
        """The columns, rows in (group, target topic, partition) order."""
        texts, c = list(self.texts), self.cols
        order = sorted(range(len(c["offset"])), key=lambda i: (texts[c["group"][i]], texts[c["target_topic"][i]],
                                                               c["partition"][i]))
        return {"texts": texts, "columns": {name: [values[i] for i in order] for name, values in c.items()}}


def to_columns(rows: Iterable[PlanRow]) -> dict[str, Any]:
    """`{"texts": [...], "columns": {field: [...]}}`: one list per field, text as indexes into one table of
    distinct strings (a plan repeats a few hundred names over 150,000 rows), a count as its low and high."""
    return PlanTable().add_rows(rows).columns()


def _packed(values: list[Any]) -> str:
    """One column as text: its values comma-separated, None as nothing (`str` of a float reads back as it was)."""
    if None not in values:  # most columns: in C, a value at a time
        return ",".join(map(str, values))
    return ",".join(["" if v is None else str(v) for v in values])


_FLOAT_COLUMNS = ("basis_age_s",)


def _unpacked(data: dict[str, Any], column: str) -> list[Any]:
    """A stored column back as values: from its text (STORED_FORMAT, `rows` values) or its list (COLUMNS_FORMAT)."""
    value = data["columns"][column]
    if isinstance(value, list):
        return value
    if not data["rows"]:
        return []
    kind = float if column in _FLOAT_COLUMNS else int
    parts = value.split(",")
    return list(map(kind, parts)) if "" not in parts else [None if x == "" else kind(x) for x in parts]


def from_columns(data: dict[str, Any], limit: int | None = None, at: Sequence[int] | None = None) -> list[PlanRow]:
    """The rows `to_columns` made, back (the first `limit` of them: a report lists a few; or those at `at`)."""
    texts, cols = data["texts"], data["columns"]
    if limit is not None:
        cols = {c: v[:limit] for c, v in cols.items()}
    if at is not None:
        cols = {c: [v[i] for i in at] for c, v in cols.items()}
    return [PlanRow.model_validate({**{c: None if v is None else texts[v] for c, v in zip(_TEXT_COLUMNS, t)},
                                    **dict(zip(_NUMBER_COLUMNS, n)),
                                    "re_read": Count.kept(*rr), "skip": Count.kept(*sk)})
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
        if translation == "precise" and r.precise_offset is not None:  # proven: `offset` is the proof's
            offset, method, re_read, skip, note = r.precise_offset, f"precise:{r.proof}", r.re_read, r.skip, None
        elif translation == "mm2" and r.mm2_offset is not None:
            offset, method, re_read, skip = r.mm2_offset, "mm2", r.mm2_re_read or ZERO, r.mm2_skip or ZERO
            note = (f"{r.why_skips(offset, skip)}: MM2's checkpoint skips {skip} record(s)"
                    if skip.may_be_positive else None)
        else:
            # An unproven row has its fallback; so has every row in mm2 mode (translated with fallbacks="all").
            assert r.fallback_offset is not None, f"{r.group} {r.target_tp}: translated without its fallback"
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


def add_earliest_fallback(rows: list[PlanRow], wanted: Mapping[str, Mapping[TP, int | None]],
                          target_admin: KafkaAdmin) -> list[PlanRow]:
    """(group, target partition) pairs nobody could translate start at the partition's earliest offset."""
    rows.extend(earliest_rows({(r.group, r.target_topic, r.partition) for r in rows}, wanted, target_admin))
    return rows


def earliest_rows(have: set[tuple[str, str, int]], wanted: Mapping[str, Mapping[TP, int | None]],
                  target_admin: KafkaAdmin) -> list[PlanRow]:
    """`earliest_row` of every wanted (group, target partition) not in `have` (group, topic, partition)."""
    missing = [(g, tp, src) for g, tps in wanted.items() for tp, src in tps.items()
               if (g, tp.topic, tp.partition) not in have]
    if not missing:
        return []
    marks = target_admin.watermarks({tp for _, tp, _ in missing})
    return [earliest_row(g, tp, src, Marks(marks[tp].low, marks[tp].high)) for g, tp, src in sorted(missing)]


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
