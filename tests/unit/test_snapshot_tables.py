"""The snapshots a proof writes hold, column for column, what their rows say (`collector.table` reads them column
by column, not as a dict per row): against the straightforward dict-per-row reading, for any rows."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorbook.parity import schemas
from mirrorbook.parity.collector import ExpectedOffset, GroupBoundary, table

names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)
offsets = st.integers(0, 2**62)
maybe = lambda s: st.one_of(st.none(), s)  # noqa: E731
expected = st.builds(ExpectedOffset, cluster=names, group=names, topic=names, partition=st.integers(0, 10_000),
                     expected_offset=offsets, true_offset=maybe(offsets), source_cluster=maybe(names),
                     source_topic=maybe(names), source_partition=maybe(st.integers(0, 10_000)),
                     source_committed=maybe(offsets))
boundaries = st.builds(GroupBoundary, group=names, source_topic=names, source_partition=st.integers(0, 10_000),
                       source_committed=offsets, target_topic=names, target_partition=st.integers(0, 10_000),
                       target_offset=maybe(offsets), plan_offset=maybe(offsets))


def by_dicts(schema: pa.Schema, rows: list) -> pa.Table:
    return pa.Table.from_pylist([r.model_dump() if not isinstance(r, dict) else r for r in rows], schema=schema)


@settings(deadline=None)
@given(st.lists(expected, max_size=30))
def test_an_expected_snapshot_holds_its_rows(rows):
    assert table(schemas.EXPECTED, rows).equals(by_dicts(schemas.EXPECTED, rows))


@settings(deadline=None)
@given(st.lists(boundaries, max_size=30))
def test_a_boundaries_snapshot_holds_its_rows(rows):
    assert table(schemas.BOUNDARIES, rows).equals(by_dicts(schemas.BOUNDARIES, rows))


@settings(deadline=None)
@given(st.lists(st.fixed_dictionaries({"cluster": names, "topic": names, "partition": st.integers(0, 10_000)},
                                      optional={"low": offsets, "high": offsets}), max_size=30))
def test_rows_given_as_dicts_lacking_a_column_hold_nulls_there(rows):
    got = table(schemas.WATERMARKS, rows)
    assert got.equals(by_dicts(schemas.WATERMARKS, rows))
    assert got.column("low").to_pylist() == [r.get("low") for r in rows]
