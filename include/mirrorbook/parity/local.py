"""The group-offset classification of spark_apps/group_parity.py, in one process with pyarrow.

Same rules, same result columns (without `reason`). Two uses: the benchmark measures where Spark
starts to pay off against it, and the Spark tests check the app's output row for row against it.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

KEY = ["cluster", "group", "topic", "partition"]
TP_KEY = ["cluster", "topic", "partition"]


def _distinct(table: pa.Table, cols: list[str]) -> pa.Table:
    return table.select(cols).group_by(cols).aggregate([])


def classify_groups(expected: pa.Table, actual: pa.Table, watermarks: pa.Table | None = None, *,
                    max_reread: int | None = None, fail_unexpected: bool = False) -> pa.Table:
    """Classify every (cluster, group, topic, partition) as OK / RE-READ / SKIP / MISSING / UNEXPECTED."""
    exp = expected.append_column("_has_expected", pc.is_valid(expected["expected_offset"]))
    act = actual.join(_distinct(expected, ["cluster", "group"]), ["cluster", "group"], join_type="left semi")
    rows = exp.join(act, KEY, join_type="full outer", coalesce_keys=True)
    if watermarks is not None:
        rows = rows.join(watermarks.select([*TP_KEY, "low", "high"]), TP_KEY, join_type="left outer",
                         coalesce_keys=True)
    else:
        rows = rows.append_column("low", pa.nulls(len(rows), pa.int64())).append_column(
            "high", pa.nulls(len(rows), pa.int64()))

    has_expected = pc.fill_null(rows["_has_expected"], False)
    committed, true_off = rows["committed_offset"], rows["true_offset"]
    reference = pc.coalesce(true_off, rows["expected_offset"])
    missing = pc.is_null(committed)
    status = pc.case_when(
        pc.make_struct(pc.invert(has_expected), missing, pc.equal(committed, reference),
                       pc.less(committed, reference), field_names=["u", "m", "ok", "rr"]),
        "UNEXPECTED", "MISSING", "OK", "RE-READ", "SKIP")
    moved = pc.is_in(status, pa.array(["RE-READ", "SKIP"]))
    n = pc.if_else(moved, pc.abs(pc.subtract(committed, reference)), 0)
    classification = pc.if_else(moved, pc.binary_join_element_wise(status, pc.cast(n, pa.string()), " "), status)
    low, high = rows["low"], rows["high"]
    out_of_range = pc.fill_null(pc.and_(pc.is_valid(low), pc.or_(pc.less(committed, low), pc.greater(committed, high))),
                                False)
    failed = pc.or_(pc.is_in(status, pa.array(["SKIP", "MISSING"])), out_of_range)
    if max_reread is not None:
        failed = pc.or_(failed, pc.and_(pc.equal(status, "RE-READ"), pc.greater(n, max_reread)))
    if fail_unexpected:
        failed = pc.or_(failed, pc.equal(status, "UNEXPECTED"))
    kind = pc.if_else(pc.is_valid(true_off), "true", pc.if_else(pc.is_valid(rows["expected_offset"]), "expected",
                                                                 pa.scalar(None, pa.string())))
    return pa.table({
        **{k: rows[k] for k in KEY},
        "expected_offset": rows["expected_offset"], "true_offset": true_off, "reference_offset": reference,
        "reference_kind": kind, "committed_offset": committed, "low": low, "high": high,
        "status": status, "n": pc.cast(n, pa.int64()), "classification": classification,
        "out_of_range": out_of_range, "failed": failed,
        **{k: rows[k] for k in ("source_cluster", "source_topic", "source_partition", "source_committed")},
    })  # no `reason`/`input_error`: the reference does not validate (the app does)
