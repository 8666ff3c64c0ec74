"""Precise offset translation: find on the target the very record a group would read next on the source.

MM2's checkpoints are conservative (the newest offset sync at or below the group's offset, +1), so a
consumer moved to the target re-reads up to `offset.lag.max` records, or far more for lagging
groups. For a planned, drained failover we can do better by *proving* where the copy of the record
at the group's committed offset C sits on the target, and we fall back to MM2's offset wherever
that proof fails. We never claim a position we have not verified.

What we rely on (MM2's own guarantees):
  (1) only MM2 writes the remote topic, and it copies a source partition in order; after a task
      restart it re-sends from its last committed source offset, so it may duplicate, never skip;
  (2) an offset sync (u→d) pairs source record u with one of its copies at target offset d.
From (1) and (2): for the newest sync at/below C (the *anchor*, u_lo→d_lo) and the oldest sync above
C (u_hi→d_hi, or the partition ends when there is none), a copy of r — the first source record at
offset >= C — lies in the target window [d_lo, d_hi]; and the k-th target record after d_lo is a
copy of a source record no later than the k-th source record after u_lo (re-sends only go back).

Proof rules, per (source partition, C); "content" = key, value, headers and timestamp value:
  both-empty   the source partition holds no records and neither does the target: P = target end.
  aligned      source records u_lo..r match target records d_lo.. one for one, in order, by content
               (the anchor pair is the first comparison): P = offset of the target record matched to
               r. By position nothing after P can be missing (no skip); r's copy is exactly there.
  aligned-end  r does not exist (C is the source's end: the group consumed everything). Source
               records u_lo..C-1 align as above with target records ending at Q, AND the target holds
               no record after Q: P = Q + 1. If the target holds more (not drained, or duplicates),
               it is not proven — we cannot tell a missing copy from an extra one.
  unique-match alignment fails (e.g. a re-send inside the window) but exactly one record in the
               window [d_lo, d_hi] carries r's content: since a copy of r must be in the window, that
               record is it, and MM2's in-order copying means nothing after r is missing after P.
Everything else is "not proven", with the reason: no anchor sync (nothing ties the source to the
target), the anchor record deleted, C outside the source's offsets, a window wider than
`max_window`, no copy of r in the window (not replicated yet), or ambiguous duplicate content
(two or more records in the window carry r's content and position does not disambiguate).
Residual assumption: if MM2 lost the sync it writes for the first record after a restart *and*
the re-sent records repeat content exactly (timestamps included), an `aligned` P is still never a
skip (by position) but could re-read that re-sent stretch.

Records re-read / skipped for an offset X are counted against a proven P on the target itself:
re-read = records in [X, P), skip = records in [P, X). For the precise offset both are 0 by
construction; the integration tests check them independently with the workload's sequence numbers.
Each needed source and target range is read once for all groups (ranges merged per partition).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, NamedTuple, Sequence

from confluent_kafka import Message
from pydantic import BaseModel

from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.reader import read_ranges
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.internal_topics import (Config, OffsetSyncsLocation, read_checkpoints, read_offset_syncs)
from mirrorbook.mm2.counts import ZERO, Count
from mirrorbook.mm2.offset_sync_store import SyncIndex, SyncWindow
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.mm2.records import Checkpoint, OffsetSync
from mirrorbook.mm2.remote_cluster_utils import group_matcher

ALIGNED, ALIGNED_END, UNIQUE, BOTH_EMPTY, NOT_PROVEN = "aligned", "aligned-end", "unique-match", "both-empty", "not-proven"
MAX_WINDOW = 100_000  # records per side; wider windows are not searched (not proven)
MERGE_GAP = 2_000     # read two ranges of a partition as one when they are this close


class Rec(NamedTuple):
    offset: int
    content: tuple  # (key, value, headers, timestamp ms)


def rec(m: Message) -> Rec:
    """A record's identity for matching. Timestamp *type* is ignored: MM2 writes LogAppendTime
    timestamps of the source as CreateTime on the target."""
    return Rec(m.offset(), (m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1]))


@dataclass(frozen=True)
class Marks:
    low: int
    high: int


class PartitionData:
    """The records read from one partition, and which offset ranges they cover (so counts are honest)."""

    def __init__(self, ranges: Sequence[tuple[int, int]], records: Sequence[Rec]) -> None:
        self.ranges = list(ranges)
        self.records = list(records)
        self.offsets = [r.offset for r in self.records]

    def covers(self, start: int, end: int) -> bool:
        return start >= end or any(s <= start and end <= e for s, e in self.ranges)

    def slice(self, start: int, end: int) -> list[Rec]:
        return self.records[bisect.bisect_left(self.offsets, start):bisect.bisect_left(self.offsets, end)]

    def count(self, start: int, end: int) -> int | None:
        if not self.covers(start, end):
            return None
        return max(0, bisect.bisect_left(self.offsets, end) - bisect.bisect_left(self.offsets, start))


class Proof(NamedTuple):
    offset: int | None
    rule: str
    reason: str | None = None

    @property
    def proven(self) -> bool:
        return self.offset is not None


def _no(reason: str) -> Proof:
    return Proof(None, NOT_PROVEN, reason)


def _first_mismatch(source: Sequence[Rec], target: Sequence[Rec], n: int) -> str | None:
    for i in range(n):
        if i >= len(target):
            return f"the target window ends after {len(target)} records, the source needs {n}"
        if source[i].content != target[i].content:
            return f"source record {source[i].offset} differs from target record {target[i].offset}"
    return None


def prove(committed: int, window: SyncWindow, source: PartitionData, target: PartitionData,
          source_marks: Marks, target_marks: Marks, max_window: int = MAX_WINDOW) -> Proof:
    """Apply the module's proof rules to one (source partition, committed offset)."""
    c = committed
    if not source_marks.low <= c <= source_marks.high:
        return _no(f"committed offset {c} is outside the source partition's offsets "
                   f"[{source_marks.low}, {source_marks.high}]")
    if source_marks.low == source_marks.high:
        if target_marks.low == target_marks.high:
            return Proof(target_marks.high, BOTH_EMPTY)
        return _no(f"the source partition holds no records but the target holds "
                   f"{target_marks.high - target_marks.low} offsets")
    srange, trange = window.source_range(source_marks.high), window.target_range(target_marks.high)
    if srange is None or trange is None or window.below is None:
        return _no(f"no offset sync at or below {c}: nothing anchors the source to the target")
    anchor = f"{window.below.upstream_offset}→{window.below.downstream_offset}"
    if srange[0] < source_marks.low or trange[0] < target_marks.low:
        return _no(f"the anchor sync's records ({anchor}) were deleted by retention")
    width = max(srange[1] - srange[0], trange[1] - trange[0])
    if width > max_window:
        return _no(f"window of {width} offsets exceeds max_window {max_window}")
    if not (source.covers(*srange) and target.covers(*trange)):
        return _no("window was not read")
    src, tgt = source.slice(*srange), target.slice(*trange)
    if not src or src[0].offset != srange[0] or not tgt or tgt[0].offset != trange[0]:
        return _no(f"the anchor sync's records ({anchor}) are not on both clusters (compacted?)")
    i = bisect.bisect_left([r.offset for r in src], c)
    r = src[i] if i < len(src) else None
    if r is None and window.above is not None:
        return _no(f"no source record at or after {c} below the next sync (compacted or deleted)")
    n = i + 1 if r is not None else i
    mismatch = _first_mismatch(src, tgt, n)
    if mismatch is None:
        if r is not None:
            return Proof(tgt[n - 1].offset, ALIGNED)
        extra = len(tgt) - n
        if extra == 0:
            return Proof(tgt[n - 1].offset + 1, ALIGNED_END)
        return _no(f"the target holds {extra} record(s) after the copy of the source's last record "
                   "(not drained yet, or duplicates)")
    if r is None:
        return _no(f"the target does not mirror the source record for record after the anchor: {mismatch}")
    matches = [t.offset for t in tgt if t.content == r.content]
    if len(matches) == 1:
        return Proof(matches[0], UNIQUE)
    if not matches:
        return _no(f"no record in target window [{trange[0]}, {trange[1]}) carries the content of source "
                   f"record {r.offset} (not replicated yet?)")
    return _no(f"ambiguous: {len(matches)} records in target window [{trange[0]}, {trange[1]}) carry the content "
               f"of source record {r.offset} and position does not decide ({mismatch})")


# -- counting what a position re-reads or skips ---------------------------------------------------

def sync_position(window: SyncWindow, target_marks: Marks) -> int | None:
    """The target offset MM2's offset-syncs prove to be at or before the group's next record (never a skip).

    With the anchor sync (u -> d), the newest at or below the committed offset C: if C == u the record at
    d is the copy of C; otherwise every record after u is copied after d, in order, so d + 1 holds a copy
    of a record no later than C (MM2's own translation, done with every sync rather than a sparse
    in-memory store or a checkpoint taken at some other offset). None without an anchor.

    Not raised to the target's log start: a position below it means retention on the target deleted the
    copies the group would read from there, and records after C may have gone with them. The log start
    is then a position of its own, whose skip `position_counts` counts.
    """
    if window.below is None:
        return None
    u, d = window.below.upstream_offset, window.below.downstream_offset
    return min(d + (0 if window.upstream_offset == u else 1), target_marks.high)


def _at_least(data: PartitionData, syncs: Sequence[OffsetSync], start: int, end: int) -> int:
    """Records in source offsets [start, end): counted where read, else the syncs in it (one record each)."""
    counted = data.count(start, end)
    return counted if counted is not None else sum(1 for s in syncs if start <= s.upstream_offset < end)


def _at_most(data: PartitionData, start: int, end: int) -> int:
    counted = data.count(start, end)
    return counted if counted is not None else max(0, end - start)


def whole_history(target_marks: Marks) -> bool:
    """The target partition still holds every record ever written to it (its log starts at 0), so its start
    is at or before the copy of any record the source still holds: a position that skips nothing."""
    return target_marks.low == 0


def position_counts(x: int, committed: int, proof: int | None, syncs: Sequence[OffsetSync], source: PartitionData,
                    target: PartitionData, source_marks: Marks, target_marks: Marks) -> tuple[Count, Count]:
    """(re-read, skip) of a group committed at `committed` on the source that starts at target offset `x`.

    Below the target's log start nothing is left to read: a consumer gets there at best (its offset is out
    of range), so `x` counts from the log start. Exact where the copy of its next record (`proof`) is known
    and the records between were read. Else bounded by the offset-syncs of one generation (both sides in
    order, no re-sends in between; "copies" are those of the records at or after `committed`):
    - skip 0 when x is at or before MM2's sync position, or at the start of a target holding its whole
      history (`whole_history`). Otherwise the skipped records are source records from `committed` up to
      the oldest sync whose copy is at or after x (u2 -> d2), or the source's end:
      at least those up to the newest sync copied below x, and at least as many as that stretch holds
      beyond what the target holds in [x, d2); at most that stretch, and at most the target offsets from
      the sync position to x (below the log start every offset counts: those copies were deleted).
    - re-read: at least the records in (u, committed) when x is just after a sync (u -> x - 1), or from
      the oldest sync below `committed` whose copy is at or after x; at most the target records between x
      and the copy of the first sync at or after `committed` (its copy follows the group's next record).
    """
    x = max(x, target_marks.low)
    if proof is not None:
        n = target.count(min(x, proof), max(x, proof))
        if n is not None:
            return (Count.exact(n), ZERO) if x <= proof else (ZERO, Count.exact(n))
    below = [s for s in syncs if s.upstream_offset <= committed]
    after = [s for s in syncs if s.upstream_offset >= committed]
    anchor = below[-1] if below else None
    safe = (anchor.downstream_offset + (0 if anchor.upstream_offset == committed else 1)) if anchor else None
    if (safe is not None and x <= safe) or (x == target_marks.low and whole_history(target_marks)):
        skip = ZERO
    else:
        passed = [s for s in after if s.downstream_offset < x]
        low = _at_least(source, syncs, committed, passed[-1].upstream_offset + 1) if passed else 0
        upper = next((s for s in after if s.downstream_offset >= x), None)
        end = upper.upstream_offset if upper else source_marks.high
        room = _at_most(target, x, upper.downstream_offset if upper else target_marks.high)
        low = max(low, _at_least(source, syncs, committed, end) - room)
        floor = safe if safe is not None else 0
        deleted = max(0, min(target_marks.low, x) - floor)
        high = min(_at_most(source, committed, end), deleted + _at_most(target, max(floor, target_marks.low), x))
        skip = Count.between(low, high)
    if skip.low > 0:  # starting past the group's next record: nothing before it is read again
        return ZERO, skip
    firsts = [s.upstream_offset for s in below if s.upstream_offset < committed and s.downstream_offset >= x]
    firsts += [s.upstream_offset + 1 for s in below if s.downstream_offset == x - 1]
    low = _at_least(source, syncs, min(firsts), committed) if firsts else 0
    ceiling = after[0].downstream_offset if after else target_marks.high
    return Count.between(low, _at_most(target, x, max(x, ceiling))), skip


# -- results --------------------------------------------------------------------------------------

FALLBACK_RULES = ("checkpoint", "offset-sync", "earliest")


class PartitionTranslation(BaseModel):
    """One (group, partition): where the group is on the source and where it should start on the target.

    `offset` is what precise mode writes: the proven position, else the highest fallback that provably
    skips nothing (MM2's checkpoint if made at or below the committed offset, MM2's offset-sync position,
    the target's start when it holds its whole history), with its re-read/skip counted or bounded. When no
    position on the target skips nothing (retention there deleted copies of records the group has not read),
    it is the target's log start, which skips the fewest, and `skip` counts them. `mm2_*` is what MM2's own
    checkpoint would do — which CAN skip: when the group rewound below the offset MM2 last checkpointed for
    it, or when the checkpoint lies below the target's log start.
    """

    group: str
    source_topic: str
    target_topic: str
    partition: int
    source_offset: int
    mm2_offset: int | None = None          # MM2's checkpoint; None: no checkpoint yet
    checkpoint_upstream: int | None = None  # the source offset that checkpoint was made for
    mm2_re_read: Count | None = None
    mm2_skip: Count | None = None
    precise_offset: int | None = None       # None: not proven
    proof: str = NOT_PROVEN
    reason: str | None = None
    sync_offset: int | None = None          # the offset-syncs' safe position (see `sync_position`)
    target_log_start: int = 0               # the target partition's log start when translated
    fallback_offset: int | None = None      # the best position without a content proof
    fallback_rule: str | None = None        # one of FALLBACK_RULES
    fallback_re_read: Count | None = None
    fallback_skip: Count | None = None
    offset: int | None = None               # what precise mode writes
    re_read: Count = ZERO                   # ... and what that re-reads / skips
    skip: Count = ZERO

    @property
    def proven(self) -> bool:
        return self.precise_offset is not None

    @property
    def target_tp(self) -> TP:
        return TP(self.target_topic, self.partition)

    def why_skips(self, offset: int, skip: Count) -> str:
        """Why starting at `offset` may skip (`skip`) records the group has not read."""
        if offset <= self.target_log_start and self.target_log_start > 0:
            deleted = "deleted" if skip.low > 0 else "may have deleted"
            return (f"the target's log starts at {self.target_log_start}: retention there {deleted} copies of "
                    f"records after the group's committed offset {self.source_offset}")
        if offset == self.mm2_offset and self.checkpoint_upstream is not None \
                and self.checkpoint_upstream > self.source_offset:
            return (f"MM2's checkpoint was made for source offset {self.checkpoint_upstream}, past the group's "
                    f"committed offset {self.source_offset} (the group rewound after it)")
        return f"offset {offset} lies past the copy of the group's next record (committed {self.source_offset})"


class TranslationTotals(BaseModel):
    partitions: int = 0
    groups: int = 0
    proven: int = 0
    not_proven: int = 0
    without_checkpoint: int = 0
    mm2_re_read: Count = ZERO   # over the rows that have a checkpoint
    mm2_skip: Count = ZERO
    mm2_skipping: int = 0       # rows whose checkpoint may skip
    re_read: Count = ZERO       # precise mode's choice
    skip: Count = ZERO
    skipping: int = 0           # rows whose precise-mode offset may skip (no position on the target skips nothing)


class PreciseReport(BaseModel):
    source_alias: str
    target_alias: str
    groups_regex: str
    rows: list[PartitionTranslation]
    totals: TranslationTotals
    checkpoints_read: int = 0
    offset_syncs_read: int = 0
    malformed_records: int = 0

    def offsets(self) -> dict[str, dict[TP, int]]:
        """group → target partition → offset to write (precise where proven, else the safe fallback)."""
        out: dict[str, dict[TP, int]] = {}
        for row in self.rows:
            if row.offset is not None:
                out.setdefault(row.group, {})[row.target_tp] = row.offset
        return out


def totals(rows: Iterable[PartitionTranslation]) -> TranslationTotals:
    t = TranslationTotals()
    groups: set[str] = set()
    for r in rows:
        groups.add(r.group)
        t.partitions += 1
        t.proven += r.proven
        t.not_proven += not r.proven
        t.without_checkpoint += r.mm2_offset is None
        if r.mm2_re_read is not None and r.mm2_skip is not None:
            t.mm2_re_read += r.mm2_re_read
            t.mm2_skip += r.mm2_skip
            t.mm2_skipping += r.mm2_skip.may_be_positive
        t.re_read += r.re_read
        t.skip += r.skip
        t.skipping += r.skip.may_be_positive
    t.groups = len(groups)
    return t


# -- reading windows ------------------------------------------------------------------------------

def merge_ranges(ranges: Iterable[tuple[int, int]], gap: int = MERGE_GAP) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(r for r in ranges if r[1] > r[0]):
        if out and s <= out[-1][1] + gap:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def read_partitions(config: Config, wanted: Mapping[TP, Iterable[tuple[int, int]]], *,
                    timeout_s: float = 60.0) -> dict[TP, PartitionData]:
    """Read every wanted range once: ranges of a partition are merged, then read in rounds (one per
    range index), all partitions of a round through one consumer."""
    merged = {tp: merge_ranges(r) for tp, r in wanted.items()}
    records: dict[TP, list[Rec]] = {tp: [] for tp in merged}
    for k in range(max((len(v) for v in merged.values()), default=0)):
        ranges = {tp: v[k] for tp, v in merged.items() if k < len(v)}
        for m in read_ranges(config, ranges, timeout_s=timeout_s):
            records[TP(m.topic(), m.partition())].append(rec(m))
    return {tp: PartitionData(merged[tp], records[tp]) for tp in merged}


def _clip(r: tuple[int, int], marks: Marks) -> tuple[int, int]:
    return max(r[0], marks.low), min(r[1], marks.high)


# -- the translation ------------------------------------------------------------------------------

@dataclass
class _Item:
    group: str
    src: TP
    tgt: TP
    committed: int
    checkpoint: Checkpoint | None


def _items(committed: Mapping[str, Mapping[TP, int]], matches: Callable[[str], bool],
           checkpoints: Mapping[tuple[str, str, int], Checkpoint], target_partitions: Mapping[str, int],
           policy: ReplicationPolicy, source_alias: str) -> list[_Item]:
    """(group, partition) pairs to translate: matching groups, on source topics mirrored to the target."""
    out = []
    for g, offsets in sorted(committed.items()):
        if not matches(g):
            continue
        for tp, off in sorted(offsets.items()):
            tgt = TP(policy.format_remote_topic(source_alias, tp.topic), tp.partition)
            if tgt.partition < target_partitions.get(tgt.topic, 0):
                out.append(_Item(g, tp, tgt, off, checkpoints.get((g, tgt.topic, tgt.partition))))
    return out


def translate_precise(source: Config, target: Config, source_alias: str, target_alias: str,
                      groups_regex: str = ".*", *, policy: ReplicationPolicy | None = None,
                      offset_syncs_location: OffsetSyncsLocation = "source",
                      committed: Mapping[str, Mapping[TP, int]] | None = None,
                      max_window: int = MAX_WINDOW, timeout_s: float = 60.0) -> PreciseReport:
    """Precise translation of every group matching `groups_regex` from `source` to `target`.

    `committed` (group → source partition → offset) defaults to the groups' committed offsets on
    the source, which must therefore be reachable (a planned failover).
    """
    policy = policy or ReplicationPolicy(source_alias=source_alias)
    src_admin, tgt_admin = KafkaAdmin(source), KafkaAdmin(target)
    matches = group_matcher(groups_regex)
    if committed is None:
        groups = sorted(g for g in src_admin.list_groups() if matches(g))
        committed = src_admin.committed_offsets(groups)
    cps = read_checkpoints(target, source_alias, policy=policy, group_filter=matches, timeout_s=timeout_s)
    syncs_cluster = source if offset_syncs_location == "source" else target
    syncs = read_offset_syncs(syncs_cluster, source_alias, target_alias, location=offset_syncs_location,
                              policy=policy, timeout_s=timeout_s)

    items = _items(committed, matches, cps.latest, tgt_admin.topics(), policy, source_alias)
    src_marks = {tp: Marks(w.low, w.high) for tp, w in src_admin.watermarks({i.src for i in items}).items()}
    tgt_marks = {tp: Marks(w.low, w.high) for tp, w in tgt_admin.watermarks({i.tgt for i in items}).items()}
    indexes = {i.src: SyncIndex(syncs.syncs.get(i.src, [])) for i in items}
    windows = {(i.src, i.committed): indexes[i.src].window(i.committed) for i in items}

    src_wanted: dict[TP, list[tuple[int, int]]] = {}
    tgt_wanted: dict[TP, list[tuple[int, int]]] = {}
    for i in items:
        w = windows[(i.src, i.committed)]
        sr, tr = w.source_range(src_marks[i.src].high), w.target_range(tgt_marks[i.tgt].high)
        if sr is None or tr is None or max(sr[1] - sr[0], tr[1] - tr[0]) > max_window:
            continue
        src_wanted.setdefault(i.src, []).append(_clip(sr, src_marks[i.src]))
        if i.checkpoint is not None:  # also read up to MM2's offset, to count what it re-reads/skips
            m = i.checkpoint.downstream_offset
            wide = (min(tr[0], m), max(tr[1], m))
            tr = wide if wide[1] - wide[0] <= max_window else tr
        tgt_wanted.setdefault(i.tgt, []).append(_clip(tr, tgt_marks[i.tgt]))
    src_data = read_partitions(source, src_wanted, timeout_s=timeout_s)
    tgt_data = read_partitions(target, tgt_wanted, timeout_s=timeout_s)

    empty = PartitionData([], [])
    proofs: dict[tuple[TP, int], Proof] = {}
    rows = []
    for i in items:
        key = (i.src, i.committed)
        if key not in proofs:
            proofs[key] = prove(i.committed, windows[key], src_data.get(i.src, empty), tgt_data.get(i.tgt, empty),
                                src_marks[i.src], tgt_marks[i.tgt], max_window)
        rows.append(_row(i, proofs[key], indexes[i.src].syncs, windows[key], src_data.get(i.src, empty),
                         tgt_data.get(i.tgt, empty), src_marks[i.src], tgt_marks[i.tgt]))
    return PreciseReport(source_alias=source_alias, target_alias=target_alias, groups_regex=groups_regex,
                         rows=rows, totals=totals(rows), checkpoints_read=cps.records,
                         offset_syncs_read=syncs.records, malformed_records=cps.malformed + syncs.malformed)


def _row(i: _Item, proof: Proof, syncs: Sequence[OffsetSync], window: SyncWindow, source: PartitionData,
         target: PartitionData, source_marks: Marks, target_marks: Marks) -> PartitionTranslation:
    c = i.committed
    mm2 = i.checkpoint.downstream_offset if i.checkpoint is not None else None
    row = PartitionTranslation(group=i.group, source_topic=i.src.topic, target_topic=i.tgt.topic,
                               partition=i.src.partition, source_offset=c, mm2_offset=mm2,
                               checkpoint_upstream=i.checkpoint.upstream_offset if i.checkpoint else None,
                               precise_offset=proof.offset, proof=proof.rule, reason=proof.reason,
                               sync_offset=sync_position(window, target_marks), target_log_start=target_marks.low)

    def counts(x: int) -> tuple[Count, Count]:
        return position_counts(x, c, proof.offset, syncs, source, target, source_marks, target_marks)

    if mm2 is not None:  # MM2's own value, as MM2 would write it (even below the log start), counted as it reads
        row.mm2_re_read, row.mm2_skip = counts(mm2)
    # Positions still on the target; one below its log start is the log start (`earliest`) at best.
    candidates = [(x, rule, *counts(x)) for x, rule in ((mm2, "checkpoint"), (row.sync_offset, "offset-sync"),
                                                        (target_marks.low, "earliest"))
                  if x is not None and x >= target_marks.low]
    safe = [cand for cand in candidates if not cand[3].may_be_positive]
    # The highest position that provably skips nothing (fewest re-reads); if there is none, the lowest — the
    # log start, which skips the fewest — with its skip counted, so the plan's gate sees it.
    best = max(safe, key=lambda cand: cand[0]) if safe else min(candidates, key=lambda cand: cand[0])
    row.fallback_offset, row.fallback_rule, row.fallback_re_read, row.fallback_skip = best
    if proof.proven:
        row.offset, row.re_read, row.skip = proof.offset, ZERO, ZERO
    else:
        row.offset, row.re_read, row.skip = best[0], best[2], best[3]
    return row


__all__ = ["prove", "translate_precise", "PreciseReport", "PartitionTranslation", "TranslationTotals",
           "PartitionData", "Marks", "Rec", "Proof", "read_partitions", "merge_ranges", "position_counts",
           "sync_position", "whole_history"]
