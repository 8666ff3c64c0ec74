"""Precise offset translation: find on the target the very record a group would read next on the source.

MM2's checkpoints are conservative (the newest offset sync at or below the group's offset, +1), so a
consumer moved to the target re-reads up to `offset.lag.max` records, or far more for lagging groups, and MM2
has none at all for a group behind its newest sync when the checkpoint task started (KAFKA-14666) or at 0
(KAFKA-12635). We *prove* where the copy of the record the group reads next sits on the target, by content,
wherever that copy can be found, and fall back to a position that provably skips nothing elsewhere. We never
claim a position we have not verified.

What we rely on (MM2's own guarantees):
  (1) only MM2 writes the remote topic, and it copies a source partition in order, one record after the
      other; after a task restart it re-sends from its last committed source offset, so it may duplicate,
      never skip a record the source still holds;
  (2) an offset sync (u→d) pairs source record u with one of its copies at target offset d.
"Records" are what MM2's source consumer reads: at its default isolation level (`read_uncommitted`, the Java
consumer's) that includes the records of aborted transactions, which MM2 copies as plain records — measured
on Kafka 4.3.1; a flow whose source consumer reads `read_committed` copies committed records only
(`source_isolation`). Commit/abort markers take offsets but are never records, on either side. So both sides
are compared record by record, never offset by offset, and the source is read as MM2 reads it.

Anchors — pairs of a source record and a target record known to be its copy, checked by content (key, value,
headers and timestamp value) before use: every offset sync whose two records are both still there (an older
sync may be compacted away or never written, and a stale one — its topic recreated since — fails the check),
and the partitions' starts: when both the source and the target hold their whole history (log start 0),
MM2's first copy is of the source's first record, so the two first records pair when their content agrees.

Chains: from an anchor, the next record on each side pair up as long as their content agrees (MM2 copies one
record after the other; a re-send shows as a record that does not), and likewise backward — the record MM2
wrote before the copy of x is the copy of the record before x, unless it restarted right there, which shows
the same way. A chain never crosses offsets that were not read, and proves nothing more than `max_window`
source offsets away from its anchor (the stated window: wider stretches are not searched).

Proof rules, per (source partition, committed offset C); r = the first source record at offset >= C:
  aligned        r is on the chain forward from the newest anchor sync at or below it.
  aligned-start  r is on the chain forward from the partitions' first records (no sync at or below it).
  aligned-back   r is on the chain backward from the nearest anchor sync above it (its older syncs compacted
                 away or never written).
  unique-match   no chain reaches r, but chains prove a copy of a record before r (at p) and one after r (at
                 q, p < q): MM2 wrote everything between those two records in between, so a copy of r lies in
                 (p, q); exactly one target record there carries r's content — that is it.
  aligned-end    r does not exist (C is past the source's last record: the group consumed everything) and
                 the target's last record is proven the copy of the source's last one: P = that offset + 1.
                 If the target holds more (not drained, or duplicates) it is not proven — we cannot tell a
                 missing copy from an extra one.
  both-empty     neither side holds a record: P = the target's end.
Where several copies of r are proven (MM2 re-sent it), P is the first of them — the copy the record proof
matches it with, and a choice no later record or sync can change. From a copy of r, MM2's in-order copying
means nothing after r is missing after P: no skip, by position. Everything else is "not proven", with the
reason: C outside the source's offsets, no anchor on either side of r, a window wider than `max_window`, no
copy of r in the window (not replicated yet), or ambiguous duplicate content.
Residual assumption: a chain links two records by content across the one place MM2 restarted (or a record
the source compacted away) only if the records there repeat content exactly, timestamps included.

Records re-read / skipped for an offset X are counted against a proven P on the target itself:
re-read = records in [X, P), skip = records in [P, X). For the precise offset both are 0 by
construction (MM2's own duplicates after P, which every consumer of the target reads, are the record
proof's to report); the integration tests check them independently with the workload's sequence numbers.

The work is organised by partition: every range a partition's groups need is read once (ranges merged), the
partition is aligned once, and each distinct committed offset on it is placed with a binary search.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Callable, Iterable, Literal, Mapping, NamedTuple, Sequence

from pydantic import BaseModel

from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.reader import Consumed, Isolation, read_ranges
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.internal_topics import (Config, OffsetSyncsLocation, read_checkpoints, read_offset_syncs)
from mirrorbook.mm2.counts import ZERO, Count, total
from mirrorbook.mm2.offset_sync_store import SyncIndex, SyncWindow
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.mm2.records import Checkpoint, OffsetSync
from mirrorbook.mm2.remote_cluster_utils import group_matcher

ALIGNED, ALIGNED_START, ALIGNED_BACK = "aligned", "aligned-start", "aligned-back"
ALIGNED_END, UNIQUE, BOTH_EMPTY, NOT_PROVEN = "aligned-end", "unique-match", "both-empty", "not-proven"
PROOF_RULES = (ALIGNED, ALIGNED_START, ALIGNED_BACK, UNIQUE, ALIGNED_END, BOTH_EMPTY)
# Positions that stand for "the group consumed everything": true for the source's end as it was, so reusing one
# later needs the same end (readiness re-proves them); every other rule names a copy of a record, which stays one.
END_RULES = (ALIGNED_END, BOTH_EMPTY)
MAX_WINDOW = 100_000  # source offsets a chain reaches from its anchor; beyond, nothing is searched (not proven)
MERGE_GAP = 2_000     # read two ranges of a partition as one when they are this close
# MM2's source consumer reads at the Java consumer's default isolation level unless the flow sets another
# (`consumer.isolation.level` / `source.consumer.isolation.level`): it copies aborted records too.
MM2_SOURCE_ISOLATION: Isolation = "read_uncommitted"


class Rec(NamedTuple):
    offset: int
    content: tuple  # (key, value, headers, timestamp ms)


def content_of(m: Consumed) -> tuple:
    """A record's identity for matching. Timestamp *type* is ignored: MM2 writes LogAppendTime
    timestamps of the source as CreateTime on the target."""
    return m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1]


def rec(m: Consumed) -> Rec:
    return Rec(m.offset(), content_of(m))


@dataclass(frozen=True)
class Marks:
    low: int
    high: int


class PartitionData:
    """The records read from one partition (offsets ascending), and which offset ranges they cover (so counts
    are honest). Kept as two lists — offsets and contents — since a partition can hold a million of them."""

    def __init__(self, ranges: Sequence[tuple[int, int]], records: Sequence[Rec] = (), *,
                 offsets: list[int] | None = None, contents: list[tuple] | None = None) -> None:
        self.ranges = sorted(ranges)
        if offsets is None:
            offsets, contents = [r.offset for r in records], [r.content for r in records]
        self.offsets: list[int] = offsets
        self.contents: list[tuple] = contents if contents is not None else []
        self._records: list[Rec] | None = None

    @property
    def records(self) -> list[Rec]:
        if self._records is None:
            self._records = [Rec(o, c) for o, c in zip(self.offsets, self.contents)]
        return self._records

    def covers(self, start: int, end: int) -> bool:
        if start >= end:
            return True
        i = bisect.bisect_right(self.ranges, (start, float("inf"))) - 1
        return i >= 0 and self.ranges[i][0] <= start and end <= self.ranges[i][1]

    def slice(self, start: int, end: int) -> list[Rec]:
        lo, hi = bisect.bisect_left(self.offsets, start), bisect.bisect_left(self.offsets, end)
        return [Rec(o, c) for o, c in zip(self.offsets[lo:hi], self.contents[lo:hi])]

    def count(self, start: int, end: int) -> int | None:
        if not self.covers(start, end):
            return None
        return max(0, bisect.bisect_left(self.offsets, end) - bisect.bisect_left(self.offsets, start))

    def runs(self) -> list[int]:
        """For each record, the index of the read range holding it: two records are consecutive in the partition
        (nothing unread between them) exactly when they are neighbours here with the same run."""
        out, k, ends = [], 0, [e for _, e in self.ranges]
        for o in self.offsets:
            while k < len(ends) and o >= ends[k]:
                k += 1
            out.append(k)
        return out


class Proof(NamedTuple):
    offset: int | None
    rule: str
    reason: str | None = None

    @property
    def proven(self) -> bool:
        return self.offset is not None


def _no(reason: str) -> Proof:
    return Proof(None, NOT_PROVEN, reason)


class _Anchor(NamedTuple):
    upstream: int    # source offset
    downstream: int  # target offset
    i: int           # its index among the source records read
    j: int           # ... among the target records read
    start: bool      # the partitions' first records, not a sync


def anchor_candidates(syncs: Iterable[OffsetSync], source_marks: Marks, target_marks: Marks
                      ) -> list[tuple[int, int]]:
    """The (upstream, downstream) pairs that may anchor an alignment, sorted: every distinct sync whose records
    retention has not deleted on either side (all generations: a re-send's sync pairs a record with its second
    copy, an older one with its first — both copies)."""
    return sorted({(s.upstream_offset, s.downstream_offset) for s in syncs
                   if source_marks.low <= s.upstream_offset < source_marks.high
                   and target_marks.low <= s.downstream_offset < target_marks.high})


def starts_pair(source_marks: Marks, target_marks: Marks) -> bool:
    """Both partitions hold their whole history (log start 0, records there): their first records may pair."""
    return source_marks.low == 0 == target_marks.low and source_marks.high > 0 and target_marks.high > 0


class Alignment:
    """One partition pair, aligned once for all the groups on it: the anchors, and how far each one's chain
    reaches forward and backward (see the module's proof rules)."""

    def __init__(self, syncs: Iterable[OffsetSync], source: PartitionData, target: PartitionData,
                 source_marks: Marks, target_marks: Marks, max_window: int = MAX_WINDOW) -> None:
        self.source, self.target, self.sm, self.tm, self.max_window = source, target, source_marks, target_marks, \
            max_window
        syncs = list(syncs)
        self.candidates = anchor_candidates(syncs, source_marks, target_marks)
        # Syncs whose records retention deleted on either side: said when nothing else anchors a record.
        self.deleted = sorted({(x.upstream_offset, x.downstream_offset) for x in syncs
                               if x.upstream_offset < source_marks.low or x.downstream_offset < target_marks.low})
        s_off, t_off = source.offsets, target.offsets
        self.s_run, self.t_run = source.runs(), target.runs()
        anchors: list[_Anchor] = []
        self.unusable: dict[tuple[int, int], str] = {}
        for u, d in self.candidates:
            i, j = bisect.bisect_left(s_off, u), bisect.bisect_left(t_off, d)
            if i == len(s_off) or s_off[i] != u or j == len(t_off) or t_off[j] != d:
                if source.covers(u, u + 1) and target.covers(d, d + 1):
                    self.unusable[(u, d)] = f"the offset sync {u}→{d} names offsets that hold no record " \
                                            "(compacted?)"
                continue
            if source.contents[i] != target.contents[j]:
                self.unusable[(u, d)] = f"the offset sync {u}→{d} pairs records of different content (stale?)"
                continue
            anchors.append(_Anchor(u, d, i, j, False))
        self.start_note: str | None = None
        if starts_pair(source_marks, target_marks) and s_off and t_off and source.covers(0, s_off[0] + 1) \
                and target.covers(0, t_off[0] + 1):
            if source.contents[0] == target.contents[0]:
                if not anchors or (anchors[0].i, anchors[0].j) != (0, 0):
                    # at the log starts (0): its window is measured from there, as the read plan's
                    anchors.insert(0, _Anchor(source_marks.low, target_marks.low, 0, 0, True))
            else:
                self.start_note = (f"the partitions' first records (source {s_off[0]}, target {t_off[0]}) differ "
                                   "in content")
        anchors.sort(key=lambda a: (a.upstream, a.downstream, not a.start))
        self.anchors = anchors
        self._ups = [a.upstream for a in anchors]
        self._cand_ups = [u for u, _ in self.candidates]
        self._copies: dict[int, tuple[int | None, str, list[str]]] = {}
        self._fwd = self._chains(forward=True)
        self._bwd = self._chains(forward=False)

    def _chains(self, forward: bool) -> list[int]:
        """For each anchor, how many records its chain pairs (itself included), going one way. An anchor the chain
        meets on the same diagonal ends it with that anchor's own length (each stretch is compared once)."""
        s_con, t_con, s_run, t_run = self.source.contents, self.target.contents, self.s_run, self.t_run
        n, m = len(s_con), len(t_con)
        step = 1 if forward else -1
        at = {(a.i, a.j): k for k, a in enumerate(self.anchors)}
        marked = {a.i for a in self.anchors}
        lengths = [0] * len(self.anchors)
        order = range(len(self.anchors) - 1, -1, -1) if forward else range(len(self.anchors))
        for k in order:
            a = self.anchors[k]
            i, j, length = a.i, a.j, 1
            while True:
                ni, nj = i + step, j + step
                if not (0 <= ni < n and 0 <= nj < m) or s_run[ni] != s_run[i] or t_run[nj] != t_run[j] \
                        or s_con[ni] != t_con[nj]:
                    break
                if ni in marked and (ni, nj) in at and lengths[at[(ni, nj)]]:
                    length += lengths[at[(ni, nj)]]
                    break
                i, j, length = ni, nj, length + 1
            lengths[k] = length
        return lengths

    # -- reaching a record ---------------------------------------------------------------------------
    def _reach(self, k: int, i: int, forward: bool) -> int | None:
        """The target index anchor k's chain pairs with source index i, within the window, else None."""
        a = self.anchors[k]
        steps = i - a.i if forward else a.i - i
        length = self._fwd[k] if forward else self._bwd[k]
        if steps < 0 or steps >= length or abs(self.source.offsets[i] - a.upstream) > self.max_window:
            return None
        return a.j + steps if forward else a.j - steps

    def _end_of(self, k: int, forward: bool) -> int:
        """The last source index anchor k's chain reaches within the window."""
        a, off = self.anchors[k], self.source.offsets
        if forward:
            last = a.i + self._fwd[k] - 1
            return min(last, bisect.bisect_right(off, a.upstream + self.max_window) - 1)
        first = a.i - self._bwd[k] + 1
        return max(first, bisect.bisect_left(off, a.upstream - self.max_window))

    def _around(self, offset: int) -> tuple[list[int], list[int]]:
        """Indexes of the anchors a record at `offset` is proven from: those of the newest candidate sync at or
        below it (else the partitions' first records), and of the oldest candidate above it. Chosen among the
        candidates — what was known before reading — so which anchors prove a record never depends on what else
        was read; a candidate that failed its content check anchors nothing."""
        cu = self._cand_ups
        k = bisect.bisect_right(cu, offset)
        lo: list[int] = []
        if k:
            u = cu[k - 1]
            lo = list(range(bisect.bisect_left(self._ups, u), bisect.bisect_right(self._ups, u)))
            lo = [x for x in lo if not self.anchors[x].start]
        elif self.anchors and self.anchors[0].start and self.anchors[0].upstream <= offset:
            lo = [0]
        hi: list[int] = []
        if k < len(cu):
            u = cu[k]
            hi = [x for x in range(bisect.bisect_left(self._ups, u), bisect.bisect_right(self._ups, u))
                  if not self.anchors[x].start]
        return lo, hi

    def copy_of(self, i: int) -> tuple[int | None, str, list[str]]:
        """The target index of the first proven copy of source record i, the rule that proved it, and why the
        others failed (when none did)."""
        found = self._copies.get(i)
        if found is None:
            found = self._copies[i] = self._copy_of(i)
        return found

    def _copy_of(self, i: int) -> tuple[int | None, str, list[str]]:
        s_off, t_off = self.source.offsets, self.target.offsets
        x = s_off[i]
        lo, hi = self._around(x)
        found: list[tuple[int, str]] = []
        for k in lo:
            j = self._reach(k, i, True)
            if j is not None:
                found.append((j, ALIGNED_START if self.anchors[k].start else ALIGNED))
        for k in hi:
            j = self._reach(k, i, False)
            if j is not None:
                found.append((j, ALIGNED_BACK))
        if found:  # the first copy; of two rules proving the same one, the one named first in PROOF_RULES
            j, rule = min(found, key=lambda f: (f[0], PROOF_RULES.index(f[1])))
            return j, rule, []
        why = self._why_not(i, lo, hi)
        # unique-match: between a proven copy of a record before x and one of a record after x
        p = max((self.anchors[k].j + (self._end_of(k, True) - self.anchors[k].i) for k in lo), default=None)
        q = min((self.anchors[k].j - (self.anchors[k].i - self._end_of(k, False)) for k in hi), default=None)
        if p is None or q is None:
            return None, NOT_PROVEN, why
        if not p < q or self.t_run[p] != self.t_run[q]:
            return None, NOT_PROVEN, why + [f"the target window ({t_off[p]}, {t_off[q]}) was not read whole"
                                                if p < q else "the copies around it are out of order"]
        want = self.source.contents[i]
        matches = [j for j in range(p + 1, q) if self.target.contents[j] == want]
        if len(matches) == 1:
            return matches[0], UNIQUE, []
        if not matches:
            return None, NOT_PROVEN, why + [f"no record in target window ({t_off[p]}, {t_off[q]}) carries the "
                                            f"content of source record {x} (not replicated yet?)"]
        return None, NOT_PROVEN, why + [f"ambiguous: {len(matches)} records in target window ({t_off[p]}, "
                                        f"{t_off[q]}) carry the content of source record {x} and position does "
                                        "not decide"]

    def _why_not(self, i: int, lo: list[int], hi: list[int]) -> list[str]:
        x = self.source.offsets[i]
        out = []
        for k in lo:
            a = self.anchors[k]
            last = self._end_of(k, True)
            what = "the partitions' first records" if a.start else f"the offset sync {a.upstream}→{a.downstream}"
            if x - a.upstream > self.max_window:
                out.append(f"{x - a.upstream} offsets from {what}: the window exceeds max_window {self.max_window}")
            else:
                out.append(f"the chain forward from {what} ends at source record {self.source.offsets[last]}"
                           + self._break(last + 1, a.j + (last - a.i) + 1))
        for k in hi:
            a = self.anchors[k]
            first = self._end_of(k, False)
            if a.upstream - x > self.max_window:
                out.append(f"{a.upstream - x} offsets to the offset sync {a.upstream}→{a.downstream} above: the "
                           f"window exceeds max_window {self.max_window}")
            else:
                out.append(f"the chain back from the offset sync {a.upstream}→{a.downstream} ends at source record "
                           f"{self.source.offsets[first]}" + self._break(first - 1, a.j - (a.i - first) - 1))
        if not lo:
            out.append(self._nothing_below(x))
        if not hi and not lo:
            out.append("no offset sync above it either: nothing anchors the source to the target")
        return out

    def _break(self, i: int, j: int) -> str:
        s, t = self.source, self.target
        if not (0 <= i < len(s.offsets)) or not (0 <= j < len(t.offsets)):
            return " (the records read end there)"
        if self.s_run[i] != self.s_run[i - 1 if i > 0 else i] or self.t_run[j] != self.t_run[j - 1 if j > 0 else j]:
            return " (offsets beyond were not read)"
        return f" (source record {s.offsets[i]} differs from target record {t.offsets[j]})"

    def _nothing_below(self, x: int) -> str:
        below = [c for c in self.candidates if c[0] <= x]
        unusable = [self.unusable[c] for c in below if c in self.unusable]
        if unusable:
            return unusable[-1]
        deleted = [c for c in self.deleted if c[0] <= x]
        if deleted:
            u, d = deleted[-1]
            return (f"the anchor sync's records ({u}→{d}) were deleted by retention (log starts: source "
                    f"{self.sm.low}, target {self.tm.low})")
        if self.start_note:
            return self.start_note
        if not starts_pair(self.sm, self.tm):
            return (f"no offset sync at or below {x}, and the partitions' starts cannot pair (log starts: source "
                    f"{self.sm.low}, target {self.tm.low} — both must hold their whole history)")
        return f"no offset sync at or below {x}"

    # -- placing a committed offset ------------------------------------------------------------------
    def position(self, committed: int) -> Proof:
        """Apply the module's proof rules to one committed offset on this partition."""
        c, sm, tm = committed, self.sm, self.tm
        s, t = self.source, self.target
        if not sm.low <= c <= sm.high:
            return _no(f"committed offset {c} is outside the source partition's offsets [{sm.low}, {sm.high}]")
        if sm.low == sm.high:
            if tm.low == tm.high:
                return Proof(tm.high, BOTH_EMPTY)
            return _no(f"the source partition holds no records but the target holds {tm.high - tm.low} offsets")
        i = bisect.bisect_left(s.offsets, c)
        upto = s.offsets[i] + 1 if i < len(s.offsets) else sm.high
        if not s.covers(c, upto):
            return _no(self._unread(c))
        if i < len(s.offsets):
            j, rule, why = self.copy_of(i)
            if j is not None:
                return Proof(t.offsets[j], rule)
            return _no("; ".join(why))
        return self._end(c)

    def _end(self, c: int) -> Proof:
        """C is past the source's last record: the group consumed everything."""
        s, t, sm, tm = self.source, self.target, self.sm, self.tm
        if not t.covers(t.offsets[-1] if t.offsets else tm.low, tm.high):
            return _no(self._unread(c))
        if not s.offsets:
            if not s.covers(sm.low, sm.high):
                return _no(self._unread(c))
            if not t.offsets:
                return Proof(tm.high, BOTH_EMPTY)
            return _no(f"the source partition holds no records but the target holds {len(t.offsets)} "
                       f"(of {tm.high - tm.low} offsets)")
        last = len(s.offsets) - 1
        if not s.covers(s.offsets[last], sm.high):
            return _no(self._unread(c))
        if not t.offsets:
            return _no(f"the target holds no record for the source's last record {s.offsets[last]} (not "
                       "replicated yet?)")
        lo, _ = self._around(s.offsets[last])
        tails = [j for k in lo if (j := self._reach(k, last, True)) is not None]
        if len(t.offsets) - 1 in tails:
            return Proof(t.offsets[-1] + 1, ALIGNED_END)
        if tails:
            extra = len(t.offsets) - 1 - max(tails)
            return _no(f"the target holds {extra} record(s) after the copy of the source's last record "
                       "(not drained yet, or duplicates)")
        _, _, why = self.copy_of(last)
        return _no("the source's last record has no proven copy: " + "; ".join(why))

    def _unread(self, c: int) -> str:
        below = [u for u, _ in self.candidates if u <= c]
        above = [u for u, _ in self.candidates if u > c]
        gaps = ([f"{c - below[-1]} offsets above the newest offset sync below it"] if below else []) + \
               ([f"{above[0] - c} offsets below the next one"] if above else [])
        if (not below or c - below[-1] > self.max_window) and (not above or above[0] - c > self.max_window):
            return (f"window of {' and '.join(gaps) or 'the whole partition'} exceeds max_window "
                    f"{self.max_window}: not searched")
        return "window was not read"


def prove(committed: int, syncs: Iterable[OffsetSync] | SyncIndex, source: PartitionData, target: PartitionData,
          source_marks: Marks, target_marks: Marks, max_window: int = MAX_WINDOW) -> Proof:
    """Apply the module's proof rules to one (source partition, committed offset), from every sync of the
    partition read (`syncs`) and the records read on both sides."""
    raw = syncs.syncs if isinstance(syncs, SyncIndex) else syncs
    return Alignment(raw, source, target, source_marks, target_marks, max_window).position(committed)


# -- what to read ----------------------------------------------------------------------------------

def wanted_ranges(committed: Iterable[int], syncs: Iterable[OffsetSync], source_marks: Marks, target_marks: Marks,
                  max_window: int = MAX_WINDOW) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The source and target ranges the proofs of these committed offsets need on one partition pair: for each,
    the stretch between the anchors around it (the newest sync at or below it — or the partitions' starts —
    and the next sync above, or the ends), whole when it fits `max_window` on both sides, else the part within
    `max_window` of each anchor. Which anchors a proof uses depends on its committed offset alone, so reading
    more (for other groups) never changes a proof."""
    sm, tm, w = source_marks, target_marks, max_window
    cands = anchor_candidates(syncs, sm, tm)
    ups = [u for u, _ in cands]
    start = starts_pair(sm, tm)
    src: set[tuple[int, int]] = set()
    tgt: set[tuple[int, int]] = set()
    for c in sorted(set(committed)):
        if not sm.low <= c <= sm.high or sm.low == sm.high:
            continue
        k = bisect.bisect_right(ups, c)
        # (upstream, lowest downstream, highest downstream) of the newest sync below and of the oldest above:
        # a re-sent record has a sync per copy
        lo = (ups[k - 1], cands[bisect.bisect_left(ups, ups[k - 1])][1], cands[k - 1][1]) if k else \
            (sm.low, tm.low, tm.low) if start else None
        hi = (ups[k], cands[k][1], cands[bisect.bisect_right(ups, ups[k]) - 1][1]) if k < len(ups) else None
        hi_u, hi_d = (hi[0] + 1, hi[2] + 1) if hi else (sm.high, tm.high)
        if tm.low == tm.high:  # the target holds nothing: proven only if the source holds nothing either
            if sm.high - sm.low <= w:
                src.add((sm.low, sm.high))
            continue
        if lo is not None and lo[1] < hi_d and hi_u - lo[0] <= w and hi_d - lo[1] <= w:
            src.add((lo[0], hi_u))
            tgt.add((lo[1], hi_d))
            continue
        if lo is not None and c - lo[0] <= w:
            src.add((lo[0], min(lo[0] + w + 1, hi_u)))
            tgt.add((lo[1], min(lo[2] + w + 1, hi_d if hi_d > lo[2] else tm.high)))
            if hi is None:  # past the newest sync: what lies between C and the end (a record, or only markers)
                src.add((c, min(c + w + 1, sm.high)))
        if hi is not None and hi[0] - c <= w:
            floor_d = lo[1] if lo is not None and lo[1] < hi[1] else tm.low
            src.add((max(hi[0] - w, lo[0] if lo is not None else sm.low), hi_u))
            tgt.add((max(hi[1] - w, floor_d), hi_d))
    clip = lambda rs, mk: [(max(a, mk.low), min(b, mk.high)) for a, b in rs]  # noqa: E731
    return clip(sorted(src), sm), clip(sorted(tgt), tm)


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
    """Sums over the rows, in plain ints (a translation has a hundred thousand rows and more)."""
    n = proven = without = mm2_skipping = skipping = 0
    mm2_re_read: list[Count] = []
    mm2_skip: list[Count] = []
    re_read: list[Count] = []
    skip: list[Count] = []
    groups: set[str] = set()
    for r in rows:
        groups.add(r.group)
        n += 1
        proven += r.precise_offset is not None
        without += r.mm2_offset is None
        if r.mm2_re_read is not None and r.mm2_skip is not None:
            mm2_re_read.append(r.mm2_re_read)
            mm2_skip.append(r.mm2_skip)
            mm2_skipping += r.mm2_skip.may_be_positive
        if r.re_read is not ZERO:
            re_read.append(r.re_read)
        if r.skip is not ZERO:
            skip.append(r.skip)
            skipping += r.skip.may_be_positive
    return TranslationTotals(partitions=n, groups=len(groups), proven=proven, not_proven=n - proven,
                             without_checkpoint=without, mm2_re_read=total(mm2_re_read), mm2_skip=total(mm2_skip),
                             mm2_skipping=mm2_skipping, re_read=total(re_read), skip=total(skip), skipping=skipping)


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
                    timeout_s: float = 60.0, isolation: Isolation = "read_committed") -> dict[TP, PartitionData]:
    """Read every wanted range once: ranges of a partition are merged, then read in rounds (one per
    range index), all partitions of a round through one consumer. `isolation`: see `read_ranges`."""
    merged = {tp: merge_ranges(r) for tp, r in wanted.items()}
    offsets: dict[tuple[str, int], list[int]] = {(tp.topic, tp.partition): [] for tp in merged}
    contents: dict[tuple[str, int], list[tuple]] = {k: [] for k in offsets}
    for k in range(max((len(v) for v in merged.values()), default=0)):
        ranges = {tp: v[k] for tp, v in merged.items() if k < len(v)}
        for m in read_ranges(config, ranges, timeout_s=timeout_s, isolation=isolation):
            key = (m.topic(), m.partition())
            offsets[key].append(m.offset())
            contents[key].append((m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1]))
    return {tp: PartitionData(merged[tp], offsets=offsets[(tp.topic, tp.partition)],
                              contents=contents[(tp.topic, tp.partition)]) for tp in merged}


# -- the translation ------------------------------------------------------------------------------

@dataclass
class Item:
    group: str
    src: TP
    tgt: TP
    committed: int
    checkpoint: Checkpoint | None


def _items(committed: Mapping[str, Mapping[TP, int]], matches: Callable[[str], bool],
           checkpoints: Mapping[tuple[str, str, int], Checkpoint], target_partitions: Mapping[str, int],
           policy: ReplicationPolicy, source_alias: str) -> list[Item]:
    """(group, partition) pairs to translate: matching groups, on source topics mirrored to the target."""
    out = []
    remote: dict[str, str] = {}  # each topic's name on the target, formatted once
    for g, offsets in sorted(committed.items()):
        if not matches(g):
            continue
        for tp, off in sorted(offsets.items()):
            topic = remote.get(tp.topic)
            if topic is None:
                topic = remote[tp.topic] = policy.format_remote_topic(source_alias, tp.topic)
            if tp.partition < target_partitions.get(topic, 0):
                out.append(Item(g, tp, TP(topic, tp.partition), off, checkpoints.get((g, topic, tp.partition))))
    return out


Fallbacks = Literal["unproven", "all"]


def translate_precise(source: Config, target: Config, source_alias: str, target_alias: str,
                      groups_regex: str = ".*", *, policy: ReplicationPolicy | None = None,
                      offset_syncs_location: OffsetSyncsLocation = "source",
                      committed: Mapping[str, Mapping[TP, int]] | None = None,
                      max_window: int = MAX_WINDOW, timeout_s: float = 60.0,
                      source_isolation: Isolation = MM2_SOURCE_ISOLATION,
                      fallbacks: Fallbacks = "all") -> PreciseReport:
    """Precise translation of every group matching `groups_regex` from `source` to `target`.

    `committed` (group → source partition → offset) defaults to the groups' committed offsets on
    the source, which must therefore be reachable (a planned failover). `source_isolation` is how MM2's source
    consumer reads (what it copies). `fallbacks`: "unproven" places and counts the fallback positions only of
    rows not proven (what precise mode writes), "all" of every row (mm2 mode writes them where MM2 has no
    checkpoint; the CLI shows them).
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
    rows = translate_items(source, target, items, syncs.syncs, src_admin, tgt_admin, max_window=max_window,
                           timeout_s=timeout_s, source_isolation=source_isolation, fallbacks=fallbacks)
    return PreciseReport(source_alias=source_alias, target_alias=target_alias, groups_regex=groups_regex,
                         rows=rows, totals=totals(rows), checkpoints_read=cps.records,
                         offset_syncs_read=syncs.records, malformed_records=cps.malformed + syncs.malformed)


class _Pair(NamedTuple):
    """One source partition and its copy, with every group-partition on it."""

    src: TP
    tgt: TP
    items: list[Item]


def translate_items(source: Config, target: Config, items: Sequence[Item],
                    syncs: Mapping[TP, Sequence[OffsetSync]], src_admin: KafkaAdmin, tgt_admin: KafkaAdmin, *,
                    max_window: int = MAX_WINDOW, timeout_s: float = 60.0,
                    source_isolation: Isolation = MM2_SOURCE_ISOLATION, fallbacks: Fallbacks = "all",
                    source_marks: Mapping[TP, Marks] | None = None, target_marks: Mapping[TP, Marks] | None = None
                    ) -> list[PartitionTranslation]:
    """The rows of `items` (in their order), partition by partition: one read of each range a partition's groups
    need (both sides, merged), one alignment of each partition pair, one proof per distinct committed offset on
    it. `source_marks`/`target_marks`: the partitions' watermarks when the caller has just read them."""
    pairs: dict[TP, _Pair] = {}
    for i in items:
        pairs.setdefault(i.src, _Pair(i.src, i.tgt, [])).items.append(i)
    src_marks = {tp: source_marks[tp] for tp in pairs} if source_marks is not None else \
        {tp: Marks(w.low, w.high) for tp, w in src_admin.watermarks(pairs).items()}
    tgt_tps = {p.tgt for p in pairs.values()}
    tgt_marks = {tp: target_marks[tp] for tp in tgt_tps} if target_marks is not None else \
        {tp: Marks(w.low, w.high) for tp, w in tgt_admin.watermarks(tgt_tps).items()}
    src_wanted: dict[TP, list[tuple[int, int]]] = {}
    tgt_wanted: dict[TP, list[tuple[int, int]]] = {}
    for p in pairs.values():
        sm, tm = src_marks[p.src], tgt_marks[p.tgt]
        sr, tr = wanted_ranges((i.committed for i in p.items), syncs.get(p.src, ()), sm, tm, max_window)
        # Also read up to MM2's checkpoints (within the window), to count what each re-reads or skips.
        cps = {i.checkpoint.downstream_offset for i in p.items if i.checkpoint is not None}
        if cps and tr:
            lo, hi = min(a for a, _ in tr), max(b for _, b in tr)
            tr = tr + [_clip(r, tm) for r in ((min(cps), lo), (hi, max(cps) + 1)) if 0 < r[1] - r[0] <= max_window]
        if sr:
            src_wanted[p.src] = sr
        if tr:
            tgt_wanted[p.tgt] = tr
    src_data = read_partitions(source, src_wanted, timeout_s=timeout_s, isolation=source_isolation)
    tgt_data = read_partitions(target, tgt_wanted, timeout_s=timeout_s)

    empty = PartitionData([], [])
    rows: dict[int, PartitionTranslation] = {}
    for p in pairs.values():
        sm, tm = src_marks[p.src], tgt_marks[p.tgt]
        sd, td = src_data.get(p.src, empty), tgt_data.get(p.tgt, empty)
        raw = syncs.get(p.src, ())
        aligned = Alignment(raw, sd, td, sm, tm, max_window)
        proofs: dict[int, Proof] = {}
        context: _Context | None = None
        for i in p.items:
            proof = proofs.get(i.committed)
            if proof is None:
                proof = proofs[i.committed] = aligned.position(i.committed)
            fallback = not proof.proven or fallbacks == "all"
            if not fallback and i.checkpoint is None:
                rows[id(i)] = _proven_row(i, proof, tm)
                continue
            if context is None:
                context = _Context(SyncIndex(raw), sd, td, sm, tm)
            rows[id(i)] = _row(i, proof, context, fallback=fallback)
    return [rows[id(i)] for i in items]


def _clip(r: tuple[int, int], marks: Marks) -> tuple[int, int]:
    return max(r[0], marks.low), min(r[1], marks.high)


class _Context(NamedTuple):
    """What counting a row's positions needs of its partition pair."""

    sync_index: SyncIndex  # not `index`: a tuple's own method
    source: PartitionData
    target: PartitionData
    source_marks: Marks
    target_marks: Marks


def _proven_row(i: Item, proof: Proof, target_marks: Marks) -> PartitionTranslation:
    """A proven row without a checkpoint to count: nothing to compare, nothing to fall back on."""
    return PartitionTranslation.model_construct(
        group=i.group, source_topic=i.src.topic, target_topic=i.tgt.topic, partition=i.src.partition,
        source_offset=i.committed, mm2_offset=None, checkpoint_upstream=None, mm2_re_read=None, mm2_skip=None,
        precise_offset=proof.offset, proof=proof.rule, reason=None, sync_offset=None,
        target_log_start=target_marks.low, fallback_offset=None, fallback_rule=None, fallback_re_read=None,
        fallback_skip=None, offset=proof.offset, re_read=ZERO, skip=ZERO)


def _row(i: Item, proof: Proof, ctx: _Context, fallback: bool = True) -> PartitionTranslation:
    c = i.committed
    syncs, source, target, source_marks, target_marks = ctx.sync_index.syncs, ctx.source, ctx.target, \
        ctx.source_marks, ctx.target_marks
    mm2 = i.checkpoint.downstream_offset if i.checkpoint is not None else None
    row = PartitionTranslation.model_construct(
        group=i.group, source_topic=i.src.topic, target_topic=i.tgt.topic, partition=i.src.partition,
        source_offset=c, mm2_offset=mm2, checkpoint_upstream=i.checkpoint.upstream_offset if i.checkpoint else None,
        mm2_re_read=None, mm2_skip=None, precise_offset=proof.offset, proof=proof.rule, reason=proof.reason,
        sync_offset=sync_position(ctx.sync_index.window(c), target_marks), target_log_start=target_marks.low,
        fallback_offset=None, fallback_rule=None, fallback_re_read=None, fallback_skip=None, offset=None,
        re_read=ZERO, skip=ZERO)

    def counts(x: int) -> tuple[Count, Count]:
        return position_counts(x, c, proof.offset, syncs, source, target, source_marks, target_marks)

    if mm2 is not None:  # MM2's own value, as MM2 would write it (even below the log start), counted as it reads
        row.mm2_re_read, row.mm2_skip = counts(mm2)
    if fallback:
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
    elif fallback:  # always, for a row not proven (translate_items)
        row.offset, _, row.re_read, row.skip = best
    return row


__all__ = ["prove", "translate_precise", "translate_items", "Item", "PreciseReport", "PartitionTranslation",
           "TranslationTotals", "PartitionData", "Marks", "Rec", "Proof", "Alignment", "read_partitions",
           "merge_ranges", "position_counts", "sync_position", "whole_history", "wanted_ranges", "content_of",
           "PROOF_RULES", "END_RULES", "MM2_SOURCE_ISOLATION"]
