"""Which offsets the record proof reads: from an exactly aligned point when the plan proves one."""

from __future__ import annotations

from mirrorbook.kafka.admin import Watermarks
from mirrorbook.kafka.types import TP
from typing import Any

import pyarrow as pa

from mirrorbook.parity import GroupBoundary
from mirrorbook.parity.collector import boundaries_table
from mirrorbook.runbooks import parity
from mirrorbook.runbooks.plan import PlanRow, RowView


def row(group: str, c: int, t: int, *, precise: bool = True, partition: int = 0) -> PlanRow:
    return PlanRow(group=group, source_topic="orders", target_topic="A.orders", partition=partition,
                   source_offset=c, offset=t, method="precise:aligned" if precise else "mm2",
                   precise_offset=t if precise else None, mm2_offset=t)


def record_ranges(rows: list[PlanRow], boundaries: pa.Table, *marks: Any) -> list[Any]:
    """`parity.record_ranges` of these rows, given as the plan's position columns."""
    return parity.record_ranges({f: [getattr(r, f) for r in rows] for f in RowView._fields}, boundaries, *marks)


def now(rows: list[PlanRow], **committed_on_target: int) -> pa.Table:
    """The boundaries as read at proof time: as planned, unless a group's target offset is given."""
    return boundaries_table([GroupBoundary(group=r.group, source_topic=r.source_topic, source_partition=r.partition,
                          source_committed=r.source_offset, target_topic=r.target_topic, target_partition=r.partition,
                          target_offset=committed_on_target.get(r.group, r.offset), plan_offset=r.offset)
                             for r in rows])


SRC = {TP("orders", 0): Watermarks(low=100, high=5000), TP("orders", 1): Watermarks(low=0, high=10)}
DST = {TP("A.orders", 0): Watermarks(low=0, high=4900), TP("A.orders", 1): Watermarks(low=0, high=10)}


def test_all_rows_proven_start_at_the_lowest_position_on_both_sides() -> None:
    [r] = record_ranges(rs := [row("g1", 3000, 2900), row("g2", 1200, 1100), row("g3", 4000, 3900)], now(rs), SRC, DST)
    assert (r.source_start, r.source_end, r.target_start, r.target_end) == (1200, 5000, 1100, 4900)


def test_one_unproven_row_means_the_whole_retained_partition() -> None:
    [r] = record_ranges(rs := [row("g1", 3000, 2900), row("g2", 1200, 1000, precise=False)], now(rs), SRC, DST)
    assert (r.source_start, r.source_end, r.target_start, r.target_end) == (100, 5000, 0, 4900)


def test_anchor_below_retention_falls_back_to_the_whole_partition() -> None:
    [r] = record_ranges(rs := [row("g1", 50, 40)], now(rs), SRC, DST)  # source low watermark is 100: C=50 is gone
    assert (r.source_start, r.target_start) == (100, 0)


def test_each_partition_pair_gets_its_own_anchor() -> None:
    rows = [row("g1", 3000, 2900), row("g1", 10, 10, partition=1)]
    got = {r.source_partition: (r.source_start, r.source_end, r.target_start, r.target_end)
           for r in record_ranges(rows, now(rows), SRC, DST)}
    assert got == {0: (3000, 5000, 2900, 4900), 1: (10, 10, 10, 10)}  # fully consumed: an empty range


def test_a_position_lowered_on_the_target_below_the_anchor_means_the_whole_partition() -> None:
    # The plan proved every row, but g2 is now committed below the anchor on the target (changed after
    # the write): the records between must be read, so the anchor is not used.
    rows = [row("g1", 3000, 2900), row("g2", 1200, 1100)]
    [r] = record_ranges(rows, now(rows, g2=500), SRC, DST)
    assert (r.source_start, r.target_start) == (100, 0)
