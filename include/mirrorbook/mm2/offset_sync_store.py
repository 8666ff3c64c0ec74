"""Kafka's OffsetSyncStore (connect/mirror, 4.x) ported faithfully, plus sync windows for precise mode.

`OffsetSyncStore` reproduces how MirrorCheckpointTask translates a group offset: up to 64 syncs per
partition kept at roughly exponential spacing (invariants A–D of the Java class), the newest sync
with `upstream <= g` wins, and `downstream + (0 if g == upstream else 1)` is the answer. It exists so
we can predict and explain MM2's checkpoints, and test against Kafka's own vectors.

`SyncIndex` answers a different question with *all* syncs read from the topic: between which two
target offsets must the copy of source offset g lie? That window is what precise translation
searches (see `mirrorbook.mm2.precise`).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Iterable

from mirrorbook.kafka.types import TP
from mirrorbook.mm2.records import OffsetSync

SYNCS_PER_PARTITION = 64  # Long.SIZE: one slot per bit of the offset
_MASK = (1 << 64) - 1


def _long(x: int) -> int:
    """Java `long` arithmetic: wrap to signed 64 bits (the invariants rely on overflow going negative)."""
    x &= _MASK
    return x - (1 << 64) if x >> 63 else x


def _invariant_b(i_sync: OffsetSync, j_sync: OffsetSync, i: int, j: int) -> bool:
    bound = _long(j_sync.upstream_offset + _long(1 << j) - (1 << i))
    return i_sync is j_sync or bound < 0 or i_sync.upstream_offset <= bound


def _invariant_c(i_sync: OffsetSync, j_sync: OffsetSync, i: int) -> bool:
    bound = _long(j_sync.upstream_offset + (1 << max(i - 2, 0)))
    return i_sync is j_sync or (bound >= 0 and i_sync.upstream_offset >= bound)


class OffsetSyncStore:
    """In-memory sync store of one MirrorCheckpointTask. Feed syncs with `handle`, then `start`.

    Like Kafka: nothing translates before `start` (the initial read-to-end); while
    `initialization_must_read_to_end` (the default), each sync read before `start` replaces all
    earlier ones, so right after start only the newest sync per partition is usable.
    """

    def __init__(self) -> None:
        self._syncs: dict[TP, list[OffsetSync]] = {}
        self.read_to_end = False
        self.initialization_must_read_to_end = True

    def start(self, syncs: Iterable[OffsetSync] = (),
              initialization_must_read_to_end: bool = True) -> "OffsetSyncStore":
        """Kafka's `start(boolean)`: replay the topic (`syncs`, in topic order), then allow translation."""
        self.initialization_must_read_to_end = initialization_must_read_to_end
        for sync in syncs:
            self.handle(sync)
        self.read_to_end = True
        return self

    def handle(self, sync: OffsetSync) -> None:
        tp = TP(sync.topic, sync.partition)
        current = self._syncs.get(tp)
        if current is None:
            self._syncs[tp] = [sync] * SYNCS_PER_PARTITION
        else:
            updated = list(current)
            self._update(updated, current, sync)
            self._syncs[tp] = updated

    def sync_for(self, tp: TP, index: int) -> OffsetSync:
        return self._syncs[tp][index]

    def stored(self, tp: TP) -> list[OffsetSync]:
        """The distinct syncs kept for `tp`, newest first."""
        out: list[OffsetSync] = []
        for s in self._syncs.get(tp, []):
            if not out or out[-1] is not s:
                out.append(s)
        return out

    def translate_downstream(self, tp: TP, upstream_offset: int) -> int | None:
        """None = no translation (not started, or no sync for `tp`); -1 = every sync is newer than the offset."""
        if not self.read_to_end:
            return None
        syncs = self._syncs.get(tp)
        if syncs is None:
            return None
        sync = self._lookup(syncs, upstream_offset)
        if sync.upstream_offset > upstream_offset:
            return -1
        return sync.downstream_offset + (0 if upstream_offset == sync.upstream_offset else 1)

    @staticmethod
    def _lookup(syncs: list[OffsetSync], upstream_offset: int) -> OffsetSync:
        for sync in syncs:  # newest to oldest: effectively a binary search over the topic's offsets
            if sync.upstream_offset <= upstream_offset:
                return sync
        return syncs[-1]

    def _update(self, syncs: list[OffsetSync], original: list[OffsetSync], sync: OffsetSync) -> None:
        upstream = sync.upstream_offset
        must_clear = not self.read_to_end and self.initialization_must_read_to_end
        if must_clear or upstream < syncs[0].upstream_offset:  # initial read, or upstream rewound
            syncs[:] = [sync] * SYNCS_PER_PARTITION
            return
        replacement = sync
        replacement_index = 0
        syncs[0] = replacement  # invariant A: the newest sync is always first
        for current in range(1, SYNCS_PER_PARTITION):
            previous = current - 1
            while True:  # prefer an older value from the original array: keeps more distinct syncs
                old = original[replacement_index]
                is_recent = _invariant_b(syncs[previous], old, previous, current)
                separated_prev = _invariant_c(syncs[previous], old, previous)
                nxt = current + 1
                separated_next = nxt >= SYNCS_PER_PARTITION or _invariant_c(old, syncs[nxt], current)
                duplicate = replacement_index + 1 < SYNCS_PER_PARTITION and old is original[replacement_index + 1]
                promote = is_recent and separated_prev and separated_next
                if promote:
                    replacement = old
                skip = duplicate or not separated_prev
                if promote or skip:
                    replacement_index += 1
                if not (replacement_index < current and skip):
                    break
            if _invariant_b(syncs[previous], syncs[current], previous, current):
                break  # invariant B holds here, so it holds for every later slot
            syncs[current] = replacement


# -- windows for precise translation --------------------------------------------------------------

@dataclass(frozen=True)
class SyncWindow:
    """Where the copy of source offset `upstream_offset` can be on the target.

    `below` is the newest sync with upstream <= the offset (the anchor: a known source↔target pair);
    `above` the oldest sync with upstream > the offset. MM2 copies records in order, so the copy of
    the first record at or after the offset lies in [below.downstream, above.downstream].
    """

    upstream_offset: int
    below: OffsetSync | None
    above: OffsetSync | None

    def source_range(self, source_high: int) -> tuple[int, int] | None:
        """Source offsets to read, [start, end): from the anchor through the upper sync (or the end)."""
        if self.below is None:
            return None
        end = self.above.upstream_offset + 1 if self.above else source_high
        return self.below.upstream_offset, min(end, source_high)

    def target_range(self, target_high: int) -> tuple[int, int] | None:
        """Target offsets to read, [start, end)."""
        if self.below is None:
            return None
        end = self.above.downstream_offset + 1 if self.above else target_high
        return self.below.downstream_offset, min(end, target_high)


class SyncIndex:
    """All syncs of one source partition from its current generation, searchable by upstream offset.

    A generation ends where upstream or downstream offsets stop increasing (topic recreated or
    truncated, or a record re-sent after a task restart): older pairs may no longer describe the
    target as it is, so only the newest generation is used. Exact duplicate syncs are ignored.
    """

    def __init__(self, syncs: Iterable[OffsetSync]) -> None:
        kept: list[OffsetSync] = []
        for s in syncs:
            if kept and (s.upstream_offset, s.downstream_offset) == (kept[-1].upstream_offset,
                                                                    kept[-1].downstream_offset):
                continue
            if kept and not (s.upstream_offset > kept[-1].upstream_offset
                             and s.downstream_offset > kept[-1].downstream_offset):
                kept = []
            kept.append(s)
        self.syncs = kept
        self._upstreams = [s.upstream_offset for s in kept]

    def window(self, upstream_offset: int) -> SyncWindow:
        i = bisect.bisect_right(self._upstreams, upstream_offset)
        below = self.syncs[i - 1] if i > 0 else None
        above = self.syncs[i] if i < len(self.syncs) else None
        return SyncWindow(upstream_offset, below, above)
