"""The exact RPO of an unplanned failover (mm2/loss.py): a simulated source log, MM2's in-order copy of a prefix
of it, Connect's flushed offset somewhere at or before the newest copy, records deleted or compacted away, and
records written after the failover began. The figure is exact and equal to the truth whenever the newest copy
identifies its original; otherwise a bound that holds the truth."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from mirrorbook.mm2.counts import Count
from mirrorbook.mm2.loss import MAX_READ, NOT_PROVEN, NOTHING_REPLICATED, UNIQUE, AtFailover, partition_loss, \
    records_after, search_range
from mirrorbook.mm2.precise import Marks, PartitionData, Rec


def _scene(offsets: list[int], contents: list[int], copied: int, flushed: int | None, low: int, cutoff: int,
           high: int):
    """The source holds `offsets` (compaction gaps between them) with `contents`; MM2 copied the first `copied`
    of them in order; Connect flushed its offset at the `flushed`-th copy (None: never)."""
    log = [Rec(o, ("k", c)) for o, c in zip(offsets, contents)]
    reached = log[copied - 1].offset if copied else -1
    replicated = log[flushed].offset if flushed is not None else -1
    at = AtFailover(replicated=replicated, target_end=copied)
    marks = Marks(low, high)
    start, end = search_range(at, marks, cutoff)
    data = PartitionData([(start, end)], [r for r in log if start <= r.offset < end and r.offset >= low])
    last_copy = log[copied - 1] if copied else None
    truth_all = sum(1 for r in log if reached < r.offset < min(cutoff, high))
    truth_now = sum(1 for r in log if reached < r.offset < min(cutoff, high) and r.offset >= low)
    return partition_loss(at, last_copy, data, marks, cutoff), truth_all, truth_now


@st.composite
def scenes(draw, unique: bool):
    n = draw(st.integers(1, 60))
    offsets = [0] + sorted(draw(st.sets(st.integers(1, 2 * n), min_size=n - 1, max_size=n - 1)))
    contents = list(range(n)) if unique else draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    copied = draw(st.integers(0, n))
    flushed = draw(st.none() | st.integers(0, copied - 1)) if copied else None
    high = offsets[-1] + 1 + draw(st.integers(0, 3))  # transaction markers after the last record
    reached = offsets[copied - 1] if copied else -1
    cutoff = draw(st.integers(reached + 1, high))
    return offsets, contents, copied, flushed, cutoff, high


@settings(max_examples=300, deadline=None)
@given(scene=scenes(unique=True))
def test_the_loss_is_exactly_the_records_between_the_newest_copy_and_the_failover(scene):
    offsets, contents, copied, flushed, cutoff, high = scene
    loss, truth, _ = _scene(offsets, contents, copied, flushed, low=offsets[0], cutoff=cutoff, high=high)
    assert loss.records == Count.exact(truth), loss
    assert loss.rule in (UNIQUE, NOTHING_REPLICATED)
    assert loss.reached == (offsets[copied - 1] if copied else -1)


@settings(max_examples=300, deadline=None)
@given(scene=scenes(unique=False), deleted=st.integers(0, 40))
def test_with_duplicate_contents_or_deleted_records_the_figure_is_a_bound_holding_the_truth(scene, deleted):
    offsets, contents, copied, flushed, cutoff, high = scene
    low = min(offsets[0] + deleted, high)
    loss, truth_all, truth_now = _scene(offsets, contents, copied, flushed, low=low, cutoff=cutoff, high=high)
    assert loss.records.low <= truth_now
    assert loss.records.high is None or truth_all <= loss.records.high, (loss, truth_all)
    if loss.records.is_exact:
        assert loss.records.low == truth_all == truth_now


def test_records_written_after_the_failover_began_are_not_counted():
    log = [Rec(o, ("k", o)) for o in range(10)]
    at = AtFailover(replicated=3, target_end=5)  # copies of 0..4; Connect flushed at 3
    data = PartitionData([(3, 10)], log[3:])
    loss = partition_loss(at, log[4], data, Marks(0, 10), cutoff=8)
    assert loss.records == Count.exact(3) and loss.reached == 4 and loss.cutoff == 8  # 5, 6, 7
    assert partition_loss(at, log[4], data, Marks(0, 10), cutoff=-1).records == Count.exact(5)  # none that recent


def test_an_unreadable_copy_bounds_the_figure_by_connects_offset_and_says_why():
    log = [Rec(o, ("k", o)) for o in range(10)]
    loss = partition_loss(AtFailover(replicated=3, target_end=5), None, PartitionData([(3, 10)], log[3:]),
                          Marks(0, 10), cutoff=10)
    assert loss.rule == NOT_PROVEN and loss.records == Count.between(0, 6) and "could not be read" in loss.note


def test_a_range_too_long_to_read_is_bounded_by_its_offsets():
    at = AtFailover(replicated=-1, target_end=0)
    start, end = search_range(at, Marks(0, MAX_READ + 500), MAX_READ + 500)
    assert (start, end) == (0, MAX_READ)
    data = PartitionData([(start, end)], [Rec(o, ("k", o)) for o in range(0, MAX_READ, 2)])  # compacted
    assert records_after(-1, data, Marks(0, MAX_READ + 500), MAX_READ + 500) == Count.between(MAX_READ // 2,
                                                                                               MAX_READ // 2 + 500)
