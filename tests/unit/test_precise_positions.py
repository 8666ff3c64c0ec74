"""Where a row that precise mode could not prove starts, and what each position re-reads or skips.

Issue 18 found rows that were NOT proven and whose MM2 checkpoint was made for a source offset ABOVE the group's
committed one (the group rewound after MM2 checkpointed it): precise mode fell back to that checkpoint and the
plan said 0 skipped. And a target whose retention deleted copies of records the group had not read yet was
taken to skip nothing at its log start. These scenes are built from records (one partition mirrored one for
one, content keyed by the record's source offset), proven or not by `prove` itself, then placed by `_row`
exactly as `translate_precise` does; the property test at the end checks every count against the truth of
randomly drawn scenes.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mirrorbook.kafka.types import TP
from mirrorbook.mm2.counts import ZERO, Count
from mirrorbook.mm2.offset_sync_store import SyncIndex
from mirrorbook.mm2.precise import (NOT_PROVEN, Marks, PartitionData, PartitionTranslation, PreciseReport, Rec,
                                    _Context, Item, _row, position_counts, prove, sync_position, totals)
from mirrorbook.mm2.records import Checkpoint, OffsetSync
from mirrorbook.runbooks.plan import TranslationPlan, earliest_row, rows_from_precise

SRC, TGT = TP("t", 0), TP("A.t", 0)
NOTHING = PartitionData([], [])


def content(seq: int) -> tuple:
    return (b"k%d" % (seq % 7), b"v%d" % seq, (("seq", str(seq).encode()),), 1_000 + seq)


def records(start: int, end: int, shift: int = 0) -> PartitionData:
    """Offsets [start, end) read, each the copy of source record `offset - shift`."""
    return PartitionData([(start, end)], [Rec(o, content(o - shift)) for o in range(start, end)])


def index(*pairs: tuple[int, int]) -> SyncIndex:
    return SyncIndex([OffsetSync(SRC.topic, 0, u, d) for u, d in pairs])


DENSE = index(*((u, u) for u in range(300)))          # offset.lag.max 0: a sync for every record
SPARSE = index((0, 0), (100, 100), (200, 200), (299, 299))


def translate(committed: int, syncs: SyncIndex, *, checkpoint: tuple[int, int] | None = None,
              source: PartitionData = NOTHING, target: PartitionData = NOTHING, source_marks: Marks = Marks(0, 300),
              target_marks: Marks = Marks(0, 300), max_window: int = 100_000) -> PartitionTranslation:
    """One row, as `translate_precise` makes it from what it read."""
    cp = Checkpoint("g", TGT.topic, 0, *checkpoint) if checkpoint else None
    proof = prove(committed, syncs, source, target, source_marks, target_marks, max_window)
    return _row(Item("g", SRC, TGT, committed, cp), proof, _Context(syncs, source, target, source_marks, target_marks))


def report(*rows: PartitionTranslation) -> PreciseReport:
    return PreciseReport(source_alias="A", target_alias="B", groups_regex="g", rows=list(rows), totals=totals(rows))


def plan(rep: PreciseReport, translation: str) -> TranslationPlan:
    return TranslationPlan(flow="A->B", direction="failover", mode="planned", translation=translation,
                           from_cluster="A", to_cluster="B", groups=["g"], rows=rows_from_precise(rep, translation))


# -- the group rewound after MM2 checkpointed it ---------------------------------------------------

def test_a_rewound_group_not_proven_starts_at_its_sync_position_and_mm2s_skip_is_counted():
    # Issue 18's scene: committed at 89 on A, MM2's latest checkpoint made at 250 (-> 250), a sync per record;
    # the window was too wide to search here (max_window 0), so nothing proves 89's copy.
    row = translate(89, DENSE, checkpoint=(250, 250), max_window=0)
    assert row.proof == NOT_PROVEN and row.checkpoint_upstream == 250 > row.source_offset == 89
    # Precise mode takes the highest position the syncs prove safe — 89 itself — not MM2's checkpoint.
    assert (row.offset, row.fallback_rule, row.skip, row.re_read) == (89, "offset-sync", ZERO, ZERO)
    # MM2's checkpoint starts 161 records past the group's next one: counted, exactly.
    assert (row.mm2_offset, row.mm2_skip, row.mm2_re_read) == (250, Count.exact(161), ZERO)
    rep = report(row)
    assert (rep.totals.skip, rep.totals.skipping) == (ZERO, 0)
    assert (rep.totals.mm2_skip, rep.totals.mm2_skipping) == (Count.exact(161), 1)

    precise, mm2 = plan(rep, "precise"), plan(rep, "mm2")
    assert precise.skipping() == [] and precise.offsets() == {"g": {TGT: 89}}
    assert precise.rows[0].method == "fallback:offset-sync" and "never skips" in precise.rows[0].note
    [skipping] = mm2.skipping()
    assert (skipping.offset, skipping.source_offset, skipping.skip, skipping.method) == \
        (250, 89, Count.exact(161), "mm2")
    assert "MM2's checkpoint was made for source offset 250, past the group's committed offset 89" in skipping.note
    assert "skips 161 record(s)" in skipping.note
    assert (mm2.totals()["skipped"], mm2.totals()["skipped_max"]) == (161, 161)
    # What the failover's gate says when it refuses the plan.
    assert mm2.skipping_text() == "g A.t-0: committed 89 on A, starts at 250 on B, skips 161 record(s) (mm2)"


def test_with_sparse_syncs_the_rewound_groups_skip_is_a_stated_bound_that_holds_the_truth():
    # offset.lag.max 100: syncs every ~100 records; MM2 translated 250 with the sync 200 -> 200, to 201.
    row = translate(89, SPARSE, checkpoint=(250, 201), max_window=5)
    assert row.proof == NOT_PROVEN and "exceeds max_window" in row.reason
    # With the sync 0 -> 0, offset 1 holds a copy of a record no later than 89: safe, and the highest that is.
    assert (row.offset, row.fallback_rule, row.skip) == (1, "offset-sync", ZERO)
    assert row.re_read.low <= 88 <= row.re_read.high  # the truth: offsets 1..88 again
    # 201 - 89 = 112 records skipped in truth; nothing was read, so the syncs bound it — from above 0.
    assert 0 < row.mm2_skip.low <= 112 <= row.mm2_skip.high and row.mm2_re_read == ZERO
    # Read (as translate_precise reads a searchable window), the source counts the records the sync 200 passed.
    read = translate(89, SPARSE, checkpoint=(250, 201), source=records(0, 300), target=records(100, 300),
                     max_window=5)
    assert read.mm2_skip.low == 112 and read.offset == 1
    assert plan(report(read), "mm2").skipping()[0].skip == read.mm2_skip


def test_a_proven_row_writes_its_proof_and_counts_mm2s_skip_against_it():
    row = translate(89, SPARSE, checkpoint=(250, 201), source=records(0, 300), target=records(0, 300))
    assert (row.precise_offset, row.offset, row.skip, row.re_read) == (89, 89, ZERO, ZERO)
    assert row.mm2_skip == Count.exact(112)


def test_a_checkpoint_made_at_or_below_the_committed_offset_is_kept_when_it_is_the_highest_safe_position():
    row = translate(150, SPARSE, checkpoint=(140, 101), max_window=0)
    assert (row.sync_offset, row.offset, row.fallback_rule, row.skip) == (101, 101, "checkpoint", ZERO)
    assert row.mm2_skip == ZERO


# -- retention on the target deleted what the group had not read -----------------------------------

def test_the_target_log_start_above_the_copy_of_the_committed_offset_is_a_counted_skip():
    # Committed at 89 on A; on B retention deleted offsets below 150 (copies of A's 0..149, one for one);
    # MM2 checkpointed the group at 89 -> 89.
    target = Marks(150, 300)
    row = translate(89, DENSE, checkpoint=(89, 89), source=records(0, 300), target=records(150, 300),
                    target_marks=target)
    assert row.proof == NOT_PROVEN and "deleted by retention" in row.reason
    assert row.sync_offset == 89  # the syncs' position, no longer on B: not raised to the log start
    assert (row.offset, row.fallback_rule, row.skip) == (150, "earliest", Count.exact(61))  # A's 89..149
    assert row.re_read == ZERO and row.target_log_start == 150
    # MM2's checkpoint (89) is below the log start: a consumer gets to 150 at best, and skips the same.
    assert (row.mm2_offset, row.mm2_skip) == (89, Count.exact(61))
    rep = report(row)
    assert (rep.totals.skip, rep.totals.skipping, rep.totals.mm2_skip) == (Count.exact(61), 1, Count.exact(61))
    for translation, offset in (("precise", 150), ("mm2", 89)):
        p = plan(rep, translation)
        [skipping] = p.skipping()
        assert (skipping.offset, skipping.skip) == (offset, Count.exact(61))
        assert "the target's log starts at 150" in skipping.note and "61 record(s)" in skipping.note
        assert (p.totals()["skipped"], p.totals()["skipped_max"]) == (61, 61)


def test_with_sparse_syncs_the_retention_skip_is_bounded_from_above_zero():
    target = Marks(150, 300)
    row = translate(89, SPARSE, checkpoint=(50, 1), source=records(0, 300), target=records(150, 300),
                    target_marks=target)
    assert (row.offset, row.fallback_rule) == (150, "earliest")
    assert 0 < row.skip.low <= 61 <= row.skip.high and row.mm2_skip == row.skip
    assert plan(report(row), "precise").skipping()[0].skip == row.skip


def test_retention_below_the_groups_position_changes_nothing():
    # B's log starts at 50, the group is at 89 and the sync 89 -> 89 is still on B: its copy is proven there.
    row = translate(89, DENSE, checkpoint=(89, 89), source=records(0, 300), target=records(50, 300),
                    target_marks=Marks(50, 300))
    assert (row.precise_offset, row.offset, row.skip, row.mm2_skip) == (89, 89, ZERO, ZERO)
    # Not proven (nothing read), the syncs still prove 89 safe, and so is everything from the log start up.
    row = translate(89, DENSE, checkpoint=(89, 89), target_marks=Marks(50, 300), max_window=0)
    assert (row.offset, row.skip, row.mm2_skip) == (89, ZERO, ZERO)
    assert position_counts(50, 89, None, DENSE.syncs, NOTHING, NOTHING, Marks(0, 300), Marks(50, 300))[1] == ZERO


def test_the_partition_start_skips_nothing_only_when_it_holds_the_whole_history():
    # No sync, no checkpoint, no proof: the start of a target that never lost a record is safe...
    whole = translate(89, index(), target_marks=Marks(0, 300))
    assert (whole.offset, whole.fallback_rule, whole.skip) == (0, "earliest", ZERO)
    # ...one that retention moved to 10 is not: what it deleted may be records the group had not read.
    moved = translate(89, index(), target_marks=Marks(10, 300))
    assert (moved.offset, moved.fallback_rule) == (10, "earliest")
    assert moved.skip.may_be_positive and moved.skip.low == 0 and moved.skip.high == 10
    [skipping] = plan(report(moved), "precise").skipping()
    assert "the target's log starts at 10: retention there may have deleted copies of records after" in skipping.note


def test_an_untranslated_pair_at_the_partition_start_is_a_skip_unless_the_whole_history_is_there():
    whole = earliest_row("g", TGT, 89, Marks(0, 300))
    assert (whole.offset, whole.skip, whole.re_read) == (0, ZERO, Count.between(0, 300))
    moved = earliest_row("g", TGT, 89, Marks(150, 300))
    assert moved.offset == 150 and moved.skip.may_be_positive and moved.skip.high is None
    assert str(moved.skip) == "unknown (not counted)" and "retention" in moved.note


def test_sync_position():
    assert sync_position(SPARSE.window(89), Marks(0, 300)) == 1
    assert sync_position(SPARSE.window(100), Marks(0, 300)) == 100  # exactly at a sync: its copy
    assert sync_position(SPARSE.window(89), Marks(150, 300)) == 1   # below the log start: said as it is
    assert sync_position(SPARSE.window(300), Marks(0, 250)) == 250  # never past the target's end
    assert sync_position(index((60, 60)).window(50), Marks(0, 300)) is None  # no anchor


def test_totals_add_counts_honestly():
    exact = translate(89, DENSE, checkpoint=(250, 250), max_window=0)
    bounded = translate(89, SPARSE, checkpoint=(250, 201), max_window=5)
    lost = translate(89, DENSE, checkpoint=(89, 89), target_marks=Marks(150, 300), max_window=0)
    t = totals([exact, bounded, lost])
    assert (t.partitions, t.groups, t.proven, t.not_proven, t.without_checkpoint) == (3, 1, 0, 3, 0)
    assert t.skip == lost.skip and t.skipping == 1
    assert t.mm2_skip == exact.mm2_skip + bounded.mm2_skip + lost.mm2_skip and t.mm2_skipping == 3
    assert not t.mm2_skip.is_exact and t.mm2_skip.low >= 161 + 61


# -- every count holds the truth -------------------------------------------------------------------

@st.composite
def scenes(draw):
    """A source partition [low, high) mirrored one for one, source record i at target offset i + shift, from the
    source offset MM2 started at (`first`, possibly since deleted on the source); syncs a random subset of those
    pairs; the target's log start anywhere in what was copied; the group anywhere in the source's offsets."""
    first = draw(st.integers(0, 5))
    low = draw(st.integers(first, first + 5))
    high = draw(st.integers(low, low + 40))
    shift = draw(st.integers(-first, 8))
    t_high = high + shift
    t_low = draw(st.integers(first + shift, t_high))
    syncs = sorted(draw(st.sets(st.integers(first, max(first, high - 1)), max_size=12)) if high > first else [])
    committed = draw(st.integers(low, high))
    cp_up = draw(st.integers(low, high))
    below = [u for u in syncs if u <= cp_up]
    checkpoint = None
    if below and draw(st.booleans()):
        u = draw(st.sampled_from(below))  # MM2's (sparse) store translated with some sync at or below
        checkpoint = (cp_up, min(u + shift + (0 if u == cp_up else 1), t_high))

    def read(lo: int, hi: int, at: int) -> PartitionData:
        kind = draw(st.sampled_from(["all", "none", "part"]))
        if kind == "none" or lo >= hi:
            return NOTHING if kind == "none" else records(lo, lo, at)
        a = lo if kind == "all" else draw(st.integers(lo, hi))
        b = hi if kind == "all" else draw(st.integers(a, hi))
        return records(a, b, at)

    return dict(first=first, shift=shift, committed=committed, checkpoint=checkpoint,
                syncs=index(*((u, u + shift) for u in syncs)), source=read(low, high, 0),
                target=read(t_low, t_high, shift), source_marks=Marks(low, high), target_marks=Marks(t_low, t_high),
                x=draw(st.integers(0, max(0, t_high))))


def truth(scene: dict, x: int) -> tuple[int, int]:
    """(re-read, skip) of the group starting at target offset x, from where each record's copy really is."""
    shift, c, tm = scene["shift"], scene["committed"], scene["target_marks"]
    x = max(x, tm.low)  # nothing below the log start: a consumer starts there at best
    copies = {i: i + shift for i in range(scene["first"], scene["source_marks"].high)}
    re_read = sum(1 for i, t in copies.items() if i < c and t >= x)
    skip = sum(1 for i, t in copies.items() if i >= c and t < x)
    return re_read, skip


def holds(count: Count, n: int) -> bool:
    return count.low <= n and (count.high is None or n <= count.high)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenes())
def test_every_count_holds_the_truth_and_a_row_said_to_skip_nothing_skips_nothing(scene):
    s = scene
    proof = prove(s["committed"], s["syncs"], s["source"], s["target"], s["source_marks"], s["target_marks"])
    re_read, skip = position_counts(s["x"], s["committed"], proof.offset, s["syncs"].syncs, s["source"], s["target"],
                                    s["source_marks"], s["target_marks"])
    true_re_read, true_skip = truth(s, s["x"])
    assert holds(skip, true_skip), (skip, true_skip)
    assert holds(re_read, true_re_read), (re_read, true_re_read)

    row = translate(s["committed"], s["syncs"], checkpoint=s["checkpoint"], source=s["source"], target=s["target"],
                    source_marks=s["source_marks"], target_marks=s["target_marks"])
    tm = s["target_marks"]
    assert tm.low <= row.offset <= tm.high  # precise mode writes a position that is on the target
    assert holds(row.skip, truth(s, row.offset)[1]) and holds(row.re_read, truth(s, row.offset)[0])
    if row.proven:
        assert truth(s, row.offset) == (0, 0)
    if row.mm2_offset is not None:
        assert holds(row.mm2_skip, truth(s, row.mm2_offset)[1])
        assert holds(row.mm2_re_read, truth(s, row.mm2_offset)[0])
    # Precise mode never chooses a skip when a zero-skip position is known: the syncs' one, or a whole history.
    safe_known = (row.sync_offset is not None and row.sync_offset >= tm.low) or tm.low == 0
    if safe_known:
        assert row.skip == ZERO and truth(s, row.offset)[1] == 0
