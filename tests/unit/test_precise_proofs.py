"""The proof rules of precise translation, on explicit record sequences."""

from __future__ import annotations

from mirrorbook.mm2.offset_sync_store import SyncIndex
from mirrorbook.mm2.precise import (ALIGNED, ALIGNED_END, BOTH_EMPTY, NOT_PROVEN, UNIQUE, Marks, PartitionData, Rec,
                                    merge_ranges, prove)
from mirrorbook.mm2.records import OffsetSync


def content(seq: int) -> tuple:
    return (b"k%d" % (seq % 7), b"v%d" % seq, (("seq", str(seq).encode()),), 1_000 + seq)


def source_records(n: int, start: int = 0) -> list[Rec]:
    return [Rec(o, content(o)) for o in range(start, n)]


def data(records: list[Rec]) -> PartitionData:
    lo = records[0].offset if records else 0
    hi = records[-1].offset + 1 if records else 0
    return PartitionData([(lo, hi)], records)


def syncs(*pairs: tuple[int, int]) -> SyncIndex:
    return SyncIndex([OffsetSync("t", 0, u, d) for u, d in pairs])


def check(c: int, idx: SyncIndex, src: list[Rec], tgt: list[Rec], src_low: int = 0, tgt_low: int = 0, **kw):
    sm = Marks(src_low, src[-1].offset + 1 if src else src_low)
    tm = Marks(tgt_low, tgt[-1].offset + 1 if tgt else tgt_low)
    return prove(c, idx.window(c), data(src), data(tgt), sm, tm, **kw)


SRC = source_records(300)
MIRROR = list(SRC)  # a perfect copy at the same offsets
SYNCS = syncs((0, 0), (101, 101), (202, 202), (299, 299))


def test_aligned_inside_the_window():
    p = check(150, SYNCS, SRC, MIRROR)
    assert (p.offset, p.rule) == (150, ALIGNED)
    assert check(101, SYNCS, SRC, MIRROR).offset == 101  # exactly at a sync
    assert check(0, SYNCS, SRC, MIRROR).offset == 0


def test_aligned_with_an_offset_shift():
    # The target started later (e.g. a retention-trimmed or pre-populated topic): offsets shift by 1000.
    tgt = [Rec(r.offset + 1000, r.content) for r in SRC]
    idx = syncs((0, 1000), (101, 1101), (202, 1202))
    assert check(170, idx, SRC, tgt, tgt_low=1000).offset == 1170


def test_end_of_partition_needs_a_drained_target():
    p = check(300, SYNCS, SRC, MIRROR)
    assert (p.offset, p.rule) == (300, ALIGNED_END)
    # The target has one record more than the source after the anchor: cannot tell a copy from a stray.
    extra = MIRROR + [Rec(300, content(999))]
    p = check(300, SYNCS, SRC, extra)
    assert p.rule == NOT_PROVEN and "1 record(s) after" in p.reason
    # Not drained: the target lacks the source's last records.
    p = check(300, SYNCS, SRC, MIRROR[:-5])
    assert p.rule == NOT_PROVEN


def test_source_gaps_are_matched_by_record_not_offset():
    # Compacted/transactional source: offsets 120..129 hold no records; the target is dense.
    src = [r for r in SRC if not 120 <= r.offset < 130]
    tgt, d = [], 0
    for r in src:
        tgt.append(Rec(d, r.content))
        d += 1
    idx = syncs((0, 0), (101, 101), (130, 120))
    p = check(125, idx, src, tgt)  # the group's next record is 130, whose copy is at 120
    assert (p.offset, p.rule) == (120, ALIGNED)


def duplicate_inside_window(dup_of: int) -> list[Rec]:
    """A mirror with a stray copy of source record `dup_of` injected at target offset 120."""
    return MIRROR[:120] + [Rec(120, content(dup_of))] + [Rec(r.offset + 1, r.content) for r in MIRROR[120:]]


def test_unique_content_proves_despite_misalignment():
    tgt = duplicate_inside_window(130)
    p = check(125, syncs((0, 0), (101, 101), (202, 203)), SRC, tgt)
    assert (p.offset, p.rule) == (126, UNIQUE)
    assert check(110, syncs((0, 0), (101, 101), (202, 203)), SRC, tgt).rule == ALIGNED  # before the stray


def test_ambiguous_duplicate_content_is_not_proven():
    tgt = duplicate_inside_window(130)
    p = check(130, syncs((0, 0), (101, 101), (202, 203)), SRC, tgt)
    assert p.rule == NOT_PROVEN and p.offset is None
    assert "ambiguous: 2 records" in p.reason


def test_identical_records_are_disambiguated_by_position():
    # Every record has the same content: only alignment from the anchor can prove a position.
    same = [Rec(o, content(1)) for o in range(200)]
    p = check(150, syncs((0, 0), (101, 101)), same, list(same))
    assert (p.offset, p.rule) == (150, ALIGNED)


def test_not_proven_without_anchor_or_outside_offsets():
    assert "nothing anchors" in check(50, syncs((60, 60)), SRC, MIRROR).reason
    assert "outside" in check(400, SYNCS, SRC, MIRROR).reason
    # The anchor's records were deleted by retention on the target.
    p = check(150, SYNCS, SRC, MIRROR[110:], tgt_low=110)
    assert "deleted" in p.reason
    p = check(150, SYNCS, SRC, MIRROR, max_window=50)
    assert "exceeds max_window" in p.reason


def test_not_replicated_yet():
    p = check(150, syncs((0, 0), (101, 101)), SRC, MIRROR[:140])
    assert p.rule == NOT_PROVEN and "not replicated yet" in p.reason


def test_both_empty():
    p = prove(0, SyncIndex([]).window(0), data([]), data([]), Marks(0, 0), Marks(0, 0))
    assert (p.offset, p.rule) == (0, BOTH_EMPTY)
    p = prove(0, SyncIndex([]).window(0), data([]), data(MIRROR[:3]), Marks(0, 0), Marks(0, 3))
    assert p.rule == NOT_PROVEN


def test_partition_data_counts_only_what_it_read():
    d = PartitionData([(10, 20), (50, 60)], [Rec(o, ()) for o in list(range(10, 20)) + list(range(50, 60))])
    assert d.count(12, 18) == 6 and d.count(50, 60) == 10 and d.count(5, 5) == 0
    assert d.count(15, 55) is None  # a hole was not read


def test_merge_ranges():
    assert merge_ranges([(100, 200), (0, 50), (150, 300), (5000, 5100), (7, 7)], gap=10) == [(0, 50), (100, 300),
                                                                                          (5000, 5100)]
    assert merge_ranges([(0, 50), (55, 60)], gap=10) == [(0, 60)]
