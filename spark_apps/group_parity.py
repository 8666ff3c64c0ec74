"""Group-offset parity: are the committed offsets of consumer groups where a runbook step says they must be?

Compares expected against actual committed offsets per (cluster, group, topic, partition) and
classifies every row:

  OK          actual == reference
  RE-READ n   actual <  reference: the group will read n records again
  SKIP n      actual >  reference: the group will never read n records
  MISSING     an expected row has no committed offset
  UNEXPECTED  a committed offset no expected row accounts for (only groups in scope: those with
              an expected row on that cluster, or matching --scope-group-regex)

reference = true_offset when known (the proven position of the record the group reads next),
else expected_offset. n is a difference of committed offsets: in records only where every offset between holds
one. On a target whose offsets are not all records — MM2 with exactly-once source support writes transaction
markers there, and its default source consumer copies aborted records — the records a group re-reads or skips
are record_parity's to count (it reads both clusters and counts neither markers nor aborted records); the
runbooks run this job --as-written, where n is only how far a committed offset moved.

With --as-written the expected offsets are what a runbook wrote, not the truth, and nothing here is taken as the
reference:

  AS-WRITTEN  actual == expected: still committed where written (the truth is the record proof's to
              establish, from both clusters' records — or unprovable without the source)
  CHANGED n   actual != expected: moved since it was written, by n offsets

With expected = offsets before a step and actual = offsets after it, the same job proves "offsets unchanged" (e.g.
around a connector stop/resume).

The job fails (exit 1) on any SKIP or MISSING, on RE-READ n > --max-reread (when given), on a
committed offset outside the partition's [low, high] watermarks (when --watermarks is given: the
consumer would be reset by auto.offset.reset), on CHANGED, and on UNEXPECTED with --fail-unexpected.

Inputs (Parquet; extra columns ignored, nullable columns may be absent):
  --expected    cluster string, group string, topic string, partition int, expected_offset long,
                true_offset long?, source_cluster string?, source_topic string?,
                source_partition int?, source_committed long?
  --actual      cluster string, group string, topic string, partition int, committed_offset long
  --watermarks  cluster string, topic string, partition int, low long, high long   (optional)

Outputs:
  <output>/rows     every classified row (Parquet): the key, expected_offset, true_offset,
                    reference_offset, reference_kind, committed_offset, low, high, status, n,
                    classification, out_of_range, failed, reason, source_* columns,
                    input_error (duplicate or null input rows for the key: then exit 2, no verdict)
  --summary         JSON: status, passed, counts per status, totals (records re-read / skipped),
                    per-group figures, failing rows (label + reason), inputs and outputs

Exit codes: 0 passed, 1 parity failed, 2 could not run. Needs only pyspark (ship parity_common.py
with --py-files).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

import parity_common as pc

APP = "group_parity"
KEY = ["cluster", "group", "topic", "partition"]
STATUS_ORDER = ["SKIP", "CHANGED", "MISSING", "RE-READ", "UNEXPECTED", "OK", "AS-WRITTEN"]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = pc.base_parser(APP, __doc__)
    parser.add_argument("--expected", required=True, help="Parquet snapshot of expected offsets")
    parser.add_argument("--actual", required=True, help="Parquet snapshot of committed offsets")
    parser.add_argument("--watermarks", help="Parquet snapshot of partition watermarks (optional)")
    parser.add_argument("--max-reread", type=int, default=None,
                        help="fail a row whose RE-READ n exceeds this (default: re-reads never fail)")
    parser.add_argument("--fail-unexpected", action="store_true", help="fail on UNEXPECTED rows too")
    parser.add_argument("--as-written", action="store_true",
                        help="expected = what a runbook wrote, not the truth: AS-WRITTEN / CHANGED, no verdict "
                             "on re-reads or skips (a move's truth is the record proof's)")
    parser.add_argument("--scope-group-regex", default=None,
                        help="also treat groups matching this regex as in scope (for UNEXPECTED)")
    args = parser.parse_args(argv)
    if args.max_reread is not None and args.max_reread < 0:
        parser.error("--max-reread must be >= 0")
    return args


def load_inputs(spark: SparkSession, args: argparse.Namespace,
                io: pc.Files) -> tuple[DataFrame, DataFrame, DataFrame | None]:
    expected = io.kept(pc.read_snapshot(spark, args.expected, pc.EXPECTED, "expected", io))
    actual = io.kept(pc.read_snapshot(spark, args.actual, pc.ACTUAL, "actual", io))
    marks = pc.read_snapshot(spark, args.watermarks, pc.WATERMARKS, "watermarks", io) if args.watermarks else None
    if marks is not None:  # small: validated on its own; the big inputs are validated while classified
        io.check(marks, args.watermarks, pc.WATERMARKS, ["cluster", "topic", "partition"], ["low", "high"],
                 "watermarks")
    return expected, actual, marks


EXPECTED_VALUES = ["expected_offset", "true_offset", "source_cluster", "source_topic", "source_partition",
                   "source_committed"]


def combine(expected: DataFrame, actual: DataFrame) -> DataFrame:
    """Expected and committed rows meet per key in ONE shuffle: a grouped aggregation over their union,
    partitioned by (cluster, group) so the scope lookup below needs no second shuffle. This replaces a
    full outer join plus two duplicate checks (three shuffles of the big inputs)."""
    typed = {f.name: f.dataType for f in pc.EXPECTED.fields}
    exp = expected.select(*KEY, F.lit(1).alias("_e"), F.lit(0).alias("_a"), *EXPECTED_VALUES,
                          F.lit(None).cast("long").alias("committed_offset"))
    act = actual.select(*KEY, F.lit(0).alias("_e"), F.lit(1).alias("_a"),
                        *[F.lit(None).cast(typed[c]).alias(c) for c in EXPECTED_VALUES], "committed_offset")
    both = exp.unionByName(act).repartition("cluster", "group")
    return both.groupBy(*KEY).agg(F.sum("_e").alias("expected_rows"), F.sum("_a").alias("actual_rows"),
                                  *[F.max(c).alias(c) for c in EXPECTED_VALUES + ["committed_offset"]])


def input_error_col() -> Column:
    """Why a key's input rows are unusable (duplicates would hide or invent differences), else null."""
    key_null = F.greatest(*[F.col(k).isNull() for k in KEY])
    return (F.when(key_null, F.lit("null in a key column"))
            .when(F.col("expected_rows") > 1, F.concat(F.col("expected_rows").cast("string"), F.lit(" expected rows")))
            .when(F.col("actual_rows") > 1, F.concat(F.col("actual_rows").cast("string"), F.lit(" actual rows")))
            .when((F.col("expected_rows") > 0) & F.col("expected_offset").isNull(), F.lit("null expected_offset"))
            .when((F.col("actual_rows") > 0) & F.col("committed_offset").isNull(), F.lit("null committed_offset")))


def in_scope(rows: DataFrame, regex: str | None) -> DataFrame:
    """Keep expected rows, and actual rows of groups the check is about (those with an expected row on that
    cluster, or matching `regex`); other groups on the cluster are none of its business."""
    scope = rows.filter("expected_rows > 0").select("cluster", "group").distinct().withColumn("_in_scope", F.lit(True))
    rows = rows.join(F.broadcast(scope), ["cluster", "group"], "left")
    keep = F.coalesce(F.col("_in_scope"), F.lit(False))
    if regex:
        keep = keep | F.col("group").rlike(regex)
    return rows.filter(keep).drop("_in_scope")


def status_col(has_expected: Column, committed: Column, reference: Column, as_written: bool) -> Column:
    known = F.when(~has_expected, F.lit("UNEXPECTED")).when(committed.isNull(), F.lit("MISSING"))
    if as_written:
        return known.when(committed == reference, F.lit("AS-WRITTEN")).otherwise(F.lit("CHANGED"))
    return (known
            .when(committed == reference, F.lit("OK"))
            .when(committed < reference, F.lit("RE-READ"))
            .otherwise(F.lit("SKIP")))


def failed_col(status: Column, n: Column, out_of_range: Column, max_reread: int | None,
               fail_unexpected: bool) -> Column:
    cond = status.isin("SKIP", "MISSING", "CHANGED") | out_of_range
    if max_reread is not None:
        cond = cond | ((status == "RE-READ") & (n > F.lit(max_reread)))
    if fail_unexpected:
        cond = cond | (status == "UNEXPECTED")
    return cond


def reason_col(max_reread: int | None) -> Column:
    """A sentence per failing row: what is wrong and the numbers that prove it."""
    s, n = F.col("status"), F.col("n").cast("string")
    ref = F.concat(F.col("reference_kind"), F.lit(" offset "), F.col("reference_offset").cast("string"))
    committed = F.concat(F.lit("committed "), F.col("committed_offset").cast("string"))
    base = (F.when(s == "SKIP", F.concat(F.lit("SKIP "), n, F.lit(" ("), committed, F.lit(", "), ref, F.lit(")")))
            .when(s == "RE-READ", F.concat(F.lit("RE-READ "), n,
                                           F.lit(f" > --max-reread {max_reread} (") if max_reread is not None
                                           else F.lit(" ("), committed, F.lit(", "), ref, F.lit(")")))
            .when(s == "MISSING", F.concat(F.lit("MISSING (no committed offset; "), ref, F.lit(")")))
            .when(s == "CHANGED", F.concat(F.lit("CHANGED "), n, F.lit(" since written ("), committed, F.lit(", "),
                                           ref, F.lit(")")))
            .when(s == "UNEXPECTED", F.concat(F.lit("UNEXPECTED ("), committed, F.lit(", no expected row)")))
            .otherwise(F.concat(F.lit("OK ("), committed, F.lit(")"))))
    oor = F.when(F.col("out_of_range"), F.concat(F.lit("; committed offset outside the watermarks ["),
                                                 F.col("low").cast("string"), F.lit(", "),
                                                 F.col("high").cast("string"), F.lit("]"))).otherwise(F.lit(""))
    return F.when(F.col("failed"), F.concat(base, oor))


def classify(expected: DataFrame, actual: DataFrame, marks: DataFrame | None, args: argparse.Namespace) -> DataFrame:
    """Every row classified, in a few selects (over Spark Connect each select is analyzed with all the plan
    below it: a chain of one withColumn per figure costs the server seconds of analysis)."""
    rows = in_scope(combine(expected, actual), args.scope_group_regex)
    if marks is not None:
        rows = rows.join(F.broadcast(marks), ["cluster", "topic", "partition"], "left")
    else:
        rows = rows.select("*", F.lit(None).cast("long").alias("low"), F.lit(None).cast("long").alias("high"))
    has_expected = F.col("expected_rows") > 0
    reference = F.col("expected_offset") if args.as_written else F.coalesce(F.col("true_offset"),
                                                                            F.col("expected_offset"))
    committed = F.col("committed_offset")
    rows = rows.select(
        "*", reference.alias("reference_offset"),
        F.when(F.lit(args.as_written), F.lit("written")).when(F.col("true_offset").isNotNull(), F.lit("true"))
        .when(F.col("expected_offset").isNotNull(), F.lit("expected")).alias("reference_kind"),
        status_col(has_expected, committed, reference, args.as_written).alias("status"),
        F.coalesce(committed.isNotNull() & F.col("low").isNotNull()
                   & ((committed < F.col("low")) | (committed > F.col("high"))), F.lit(False)).alias("out_of_range"))
    moved = F.col("status").isin("RE-READ", "SKIP", "CHANGED")
    n = F.when(moved, F.abs(committed - F.col("reference_offset"))).otherwise(F.lit(0)).cast("long")
    rows = rows.select(
        "*", n.alias("n"),
        F.when(moved, F.concat_ws(" ", F.col("status"), n.cast("string"))).otherwise(F.col("status"))
        .alias("classification"),
        failed_col(F.col("status"), n, F.col("out_of_range"), args.max_reread, args.fail_unexpected).alias("failed"))
    return rows.select(*KEY, "expected_offset", "true_offset", "reference_offset", "reference_kind",
                       "committed_offset", "low", "high", "status", "n", "classification", "out_of_range",
                       "failed", reason_col(args.max_reread).alias("reason"), "source_cluster", "source_topic",
                       "source_partition", "source_committed", input_error_col().alias("input_error"))


def failure_entry(r: dict[str, Any]) -> dict[str, Any]:
    return {"check": "group-offset",
            "label": f"{r['cluster']} group {r['group']} {pc.tp_label(r['topic'], r['partition'])}",
            **r}


def summarize(res: DataFrame, path: str, args: argparse.Namespace) -> dict[str, Any]:
    """Figures from the written result, in one query: the totals, the first groups (failing first), the
    first failing rows and a few rows with unusable input."""
    is_ = lambda s: F.col("status") == s  # noqa: E731
    sums = [*[F.sum(is_(s).cast("long")).alias(s) for s in STATUS_ORDER],
               F.sum(F.when(is_("RE-READ"), F.col("n")).otherwise(0)).alias("reread_records"),
               F.sum(F.when(is_("SKIP"), F.col("n")).otherwise(0)).alias("skipped_records"),
               F.sum(F.col("failed").cast("long")).alias("failures_total")]
    totals = res.agg(F.count(F.lit(1)).alias("rows"), *sums, F.countDistinct("cluster", "group").alias("groups_total"),
                     F.count("input_error").alias("input_errors"))
    per_group = res.groupBy("cluster", "group").agg(
        F.count(F.lit(1)).alias("partitions"),
        *[F.sum(is_(s).cast("long")).alias(s.lower().replace("-", "")) for s in STATUS_ORDER],
        F.sum(F.when(is_("RE-READ"), F.col("n")).otherwise(0)).alias("reread_records"),
        F.sum(F.when(is_("SKIP"), F.col("n")).otherwise(0)).alias("skipped_records"),
        F.max(F.col("failed")).alias("failed"))
    order = F.array_position(F.array(*[F.lit(s) for s in STATUS_ORDER]), F.col("status"))
    got = pc.collect_many({
        "totals": totals,
        "groups": per_group.orderBy(F.desc("failed"), "cluster", "group").limit(args.max_listed),
        "failing": res.filter("failed").orderBy(order, *KEY).limit(args.max_listed),
        "bad_input": res.filter(F.col("input_error").isNotNull()).select(*KEY, "input_error").limit(5)})
    figures = {k: int(v or 0) for k, v in got["totals"][0].items()}
    if figures["input_errors"]:
        shown = "; ".join(f"{r['cluster']} group {r['group']} {pc.tp_label(r['topic'], r['partition'])}: "
                          f"{r['input_error']}" for r in got["bad_input"])
        raise pc.InputError(f"{figures['input_errors']} key(s) with unusable input rows (the results in {path} "
                            f"are no verdict): {shown}")
    groups = sorted(got["groups"], key=lambda g: (not g["failed"], *pc.sort_key(g, "cluster", "group")))
    rank = {s: i for i, s in enumerate(STATUS_ORDER)}
    listed = sorted(got["failing"], key=lambda r: (rank[r["status"]], *pc.sort_key(r, *KEY)))
    return {
        "passed": figures["failures_total"] == 0,
        "counts": {s: figures[s] for s in STATUS_ORDER},
        "totals": {k: figures[k] for k in ("rows", "reread_records", "skipped_records")},
        "groups": groups,
        "groups_total": figures["groups_total"],
        "failures": [failure_entry(r) for r in listed],
        "failures_total": figures["failures_total"],
    }


def body(args: argparse.Namespace, io: pc.Files = pc.FILES):
    def run(spark: SparkSession) -> dict[str, Any]:
        expected, actual, marks = load_inputs(spark, args, io)
        out = f"{args.output.rstrip('/')}/rows"
        result = summarize(io.store(classify(expected, actual, marks, args), out), out, args)
        result["inputs"] = {"expected": args.expected, "actual": args.actual, "watermarks": args.watermarks}
        result["thresholds"] = {"max_reread": args.max_reread, "fail_unexpected": args.fail_unexpected,
                                "scope_group_regex": args.scope_group_regex, "as_written": args.as_written}
        result["outputs"] = {"rows": out}
        return result
    return run


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return pc.run_app(APP, args, body(args))


if __name__ == "__main__":
    sys.exit(main())
