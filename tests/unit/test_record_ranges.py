"""Which offsets the record proof reads: from an exactly aligned point when the plan proves one."""

from __future__ import annotations

from mirrorbook.kafka.admin import Watermarks
from mirrorbook.kafka.types import TP
from mirrorbook.runbooks.parity import record_ranges
from mirrorbook.runbooks.plan import PlanRow


def row(group: str, c: int, t: int, *, precise: bool = True, partition: int = 0) -> PlanRow:
    return PlanRow(group=group, source_topic="orders", target_topic="A.orders", partition=partition,
                   source_offset=c, offset=t, method="precise:aligned" if precise else "mm2",
                   precise_offset=t if precise else None, mm2_offset=t)


SRC = {TP("orders", 0): Watermarks(low=100, high=5000), TP("orders", 1): Watermarks(low=0, high=10)}
DST = {TP("A.orders", 0): Watermarks(low=0, high=4900), TP("A.orders", 1): Watermarks(low=0, high=10)}


def test_all_rows_proven_start_at_the_lowest_position_on_both_sides() -> None:
    [r] = record_ranges([row("g1", 3000, 2900), row("g2", 1200, 1100), row("g3", 4000, 3900)], SRC, DST)
    assert (r.source_start, r.source_end, r.target_start, r.target_end) == (1200, 5000, 1100, 4900)


def test_one_unproven_row_means_the_whole_retained_partition() -> None:
    [r] = record_ranges([row("g1", 3000, 2900), row("g2", 1200, 1000, precise=False)], SRC, DST)
    assert (r.source_start, r.source_end, r.target_start, r.target_end) == (100, 5000, 0, 4900)


def test_anchor_below_retention_falls_back_to_the_whole_partition() -> None:
    [r] = record_ranges([row("g1", 50, 40)], SRC, DST)  # source low watermark is 100: C=50 is gone
    assert (r.source_start, r.target_start) == (100, 0)


def test_each_partition_pair_gets_its_own_anchor() -> None:
    rows = [row("g1", 3000, 2900), row("g1", 10, 10, partition=1)]
    got = {r.source_partition: (r.source_start, r.source_end, r.target_start, r.target_end)
           for r in record_ranges(rows, SRC, DST)}
    assert got == {0: (3000, 5000, 2900, 4900), 1: (10, 10, 10, 10)}  # fully consumed: an empty range
