"""The snapshots a proof writes hold, column for column, what their rows say (`collector.table` reads them column
by column, not as a dict per row): against the straightforward dict-per-row reading, for any rows. A snapshot made
from whole columns (`collector.columns_table`) is refused exactly when a row model would refuse one of its rows."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from mirrorbook.parity import schemas
from mirrorbook.parity.collector import ExpectedOffset, GroupBoundary, columns_table, table

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


# Any value a column of the schema can hold, the model's rules broken or not.
loose = {pa.string(): st.one_of(st.none(), st.just(""), names), pa.int32(): st.one_of(st.none(), st.integers(-3, 10)),
         pa.int64(): st.one_of(st.none(), st.integers(-3, 2**62))}


def loose_rows(schema: pa.Schema) -> st.SearchStrategy[list[dict]]:
    return st.lists(st.fixed_dictionaries({f.name: loose[f.type] for f in schema}), max_size=8)


def refusals(model: type[BaseModel], row: dict) -> set[str]:
    """The fields for which `model` refuses `row`."""
    try:
        model.model_validate(row)
    except ValidationError as exc:
        return {str(e["loc"][0]) for e in exc.errors()}
    return set()


@settings(deadline=None, max_examples=200)
@given(st.sampled_from([(schemas.EXPECTED, ExpectedOffset), (schemas.BOUNDARIES, GroupBoundary)]).flatmap(
    lambda pair: st.tuples(st.just(pair), loose_rows(pair[0]))))
def test_whole_columns_are_refused_exactly_when_a_row_model_refuses_a_row(case):
    (schema, model), rows = case
    columns = {f.name: [r[f.name] for r in rows] for f in schema}
    if not any(refusals(model, r) for r in rows):
        assert columns_table(schema, columns).equals(table(schema, [model.model_validate(r) for r in rows]))
        return
    with pytest.raises(ValueError) as err:
        columns_table(schema, columns)
    column, row = str(err.value).split(" ")[0], int(str(err.value).split(": row ")[1].split(" ")[0])
    assert column in refusals(model, rows[row])  # a column and a row the model refuses for it


def test_a_refusal_says_which_column_which_rule_and_where():
    with pytest.raises(ValueError, match=r"^source_committed must be >= 0: row 1 has -1 \(1 of 2 rows\)$"):
        columns_table(schemas.BOUNDARIES, {"group": ["g", "g"], "source_topic": ["t", "t"], "source_partition": [0, 1],
                                           "source_committed": [5, -1], "target_topic": ["A.t", "A.t"],
                                           "target_partition": [0, 1], "target_offset": [5, None],
                                           "plan_offset": [5, 0]})
