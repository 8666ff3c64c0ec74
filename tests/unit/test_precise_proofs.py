"""The proof rules of precise translation, on explicit record sequences (the property tests against a
brute-force oracle are in test_precise_alignment.py)."""

from __future__ import annotations

from mirrorbook.mm2.offset_sync_store import SyncIndex
from mirrorbook.mm2.precise import (ALIGNED, ALIGNED_BACK, ALIGNED_END, ALIGNED_START, BOTH_EMPTY, NOT_PROVEN, UNIQUE,
                                    Marks, PartitionData, Rec, merge_ranges, prove, wanted_ranges)
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
    return prove(c, idx, data(src), data(tgt), sm, tm, **kw)


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


def test_a_stray_below_the_group_is_passed_backward_from_the_sync_above():
    # A stray copy of A's future record 130 at B 120: the chain forward from 101 ends at 119; the one back from the
    # sync 202 -> 203 reaches every record down to 120.
    tgt = duplicate_inside_window(130)
    idx = syncs((0, 0), (101, 101), (202, 203))
    assert (check(125, idx, SRC, tgt).offset, check(125, idx, SRC, tgt).rule) == (126, ALIGNED_BACK)
    assert (check(130, idx, SRC, tgt).offset, check(130, idx, SRC, tgt).rule) == (131, ALIGNED_BACK)
    assert check(110, idx, SRC, tgt).rule == ALIGNED  # before the stray


def two_strays() -> list[Rec]:
    """Strays at B 120 (a copy of A's 130) and B 141 (a record A never held): A's 0..119 at 0..119, 120..139 at
    121..140, 140.. at 142.."""
    shifted = [Rec(r.offset + 1, r.content) for r in MIRROR[120:140]]
    tail = [Rec(r.offset + 2, r.content) for r in MIRROR[140:]]
    return MIRROR[:120] + [Rec(120, content(130))] + shifted + [Rec(141, content(999))] + tail


def test_unique_content_proves_between_two_broken_chains():
    idx = syncs((0, 0), (101, 101), (202, 204))
    p = check(125, idx, SRC, two_strays())
    assert (p.offset, p.rule) == (126, UNIQUE)


def test_ambiguous_duplicate_content_is_not_proven():
    p = check(130, syncs((0, 0), (101, 101), (202, 204)), SRC, two_strays())
    assert p.rule == NOT_PROVEN and p.offset is None
    assert "ambiguous: 2 records" in p.reason
    assert "the chain forward from the offset sync 101→101 ends at source record 119 (source record 120 differs " \
           "from target record 120)" in p.reason


def test_identical_records_are_disambiguated_by_position():
    # Every record has the same content: only alignment from the anchor can prove a position.
    same = [Rec(o, content(1)) for o in range(200)]
    p = check(150, syncs((0, 0), (101, 101)), same, list(same))
    assert (p.offset, p.rule) == (150, ALIGNED)


def test_from_the_partitions_starts_when_no_sync_lies_below():
    # MM2's first sync (0 -> 0) compacted away, or never written: both partitions hold their whole history, so
    # their first records pair, and the chain forward from there proves the groups below the oldest sync left.
    p = check(50, syncs((60, 60)), SRC, MIRROR)
    assert (p.offset, p.rule) == (50, ALIGNED_START)
    assert check(0, syncs((60, 60)), SRC, MIRROR).offset == 0
    # ... not when either side lost its start to retention: then only the sync above anchors them.
    p = check(50, syncs((60, 60)), SRC, MIRROR[10:], tgt_low=10)
    assert (p.offset, p.rule) == (50, ALIGNED_BACK)
    # ... nor when the first records differ (MM2 started later than the source's first record).
    later = [Rec(r.offset - 3, r.content) for r in MIRROR[3:]]
    p = check(2, syncs(), SRC, later)
    assert p.rule == NOT_PROVEN and "the partitions' first records (source 0, target 0) differ in content" in p.reason


def test_not_proven_without_anchor_or_outside_offsets():
    assert "nothing anchors" in check(50, syncs(), SRC[10:], MIRROR[10:], src_low=10, tgt_low=10).reason
    assert "outside" in check(400, SYNCS, SRC, MIRROR).reason
    # Retention on the target deleted the syncs 0 -> 0 and 101 -> 101: the one above (202) still anchors 150...
    p = check(150, SYNCS, SRC, MIRROR[110:], tgt_low=110)
    assert (p.offset, p.rule) == (150, ALIGNED_BACK)
    # ... but the copy of 105 is gone with them.
    p = check(105, SYNCS, SRC, MIRROR[110:], tgt_low=110)
    assert p.rule == NOT_PROVEN and "the anchor sync's records (101→101) were deleted by retention" in p.reason
    # Both syncs around 150 lie further than the window, and position alone could tell its identical records apart.
    same = [Rec(o, content(1)) for o in range(300)]
    p = check(150, SYNCS, same, list(same), max_window=40)
    assert p.rule == NOT_PROVEN
    assert "49 offsets from the offset sync 101→101: the window exceeds max_window 40" in p.reason
    # Unique content between the two chains' ends places it all the same (its copy lies between them).
    assert check(150, SYNCS, SRC, MIRROR, max_window=40) == (150, UNIQUE, None)


def test_not_replicated_yet():
    p = check(150, syncs((0, 0), (101, 101)), SRC, MIRROR[:140])
    assert p.rule == NOT_PROVEN and "ends at source record 139" in p.reason


def test_a_stale_sync_anchors_nothing():
    # The target was recreated: the old sync 150 -> 150 now names a record of different content.
    other = MIRROR[:150] + [Rec(o, content(o + 1000)) for o in range(150, 300)]
    p = check(160, syncs((0, 0), (150, 150)), SRC, other)
    assert p.rule == NOT_PROVEN and "the offset sync 150→150 pairs records of different content" in p.reason


def test_both_empty():
    p = prove(0, SyncIndex([]), data([]), data([]), Marks(0, 0), Marks(0, 0))
    assert (p.offset, p.rule) == (0, BOTH_EMPTY)
    p = prove(0, SyncIndex([]), data([]), data(MIRROR[:3]), Marks(0, 0), Marks(0, 3))
    assert p.rule == NOT_PROVEN
    # A source whose offsets are only transaction markers, nothing on the target: read, both hold no record.
    p = prove(2, SyncIndex([]), PartitionData([(0, 3)], []), PartitionData([(0, 0)], []), Marks(0, 3), Marks(0, 0))
    assert (p.offset, p.rule) == (0, BOTH_EMPTY)


def test_what_is_read_depends_on_each_groups_anchors_alone():
    marks = Marks(0, 300)
    src, tgt = wanted_ranges([150], SYNCS.syncs, marks, marks)
    assert (src, tgt) == ([(101, 203)], [(101, 203)])  # the stretch between the syncs around 150
    src, tgt = wanted_ranges([150], SYNCS.syncs, marks, marks, max_window=20)
    assert (src, tgt) == ([], [])  # both anchors too far: nothing read, not searched
    src, tgt = wanted_ranges([195], SYNCS.syncs, marks, marks, max_window=20)
    assert (src, tgt) == ([(182, 203)], [(182, 203)])  # back from the sync above
    src, _ = wanted_ranges([5], [], marks, marks)
    assert src == [(0, 300)]  # no sync: from both starts to the ends


def test_partition_data_counts_only_what_it_read():
    d = PartitionData([(10, 20), (50, 60)], [Rec(o, ()) for o in list(range(10, 20)) + list(range(50, 60))])
    assert d.count(12, 18) == 6 and d.count(50, 60) == 10 and d.count(5, 5) == 0
    assert d.count(15, 55) is None  # a hole was not read


def test_merge_ranges():
    assert merge_ranges([(100, 200), (0, 50), (150, 300), (5000, 5100), (7, 7)], gap=10) == [(0, 50), (100, 300),
                                                                                          (5000, 5100)]
    assert merge_ranges([(0, 50), (55, 60)], gap=10) == [(0, 60)]
