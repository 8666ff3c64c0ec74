"""Record parity: is the mirrored topic on the target the same records as the source topic, in order?

Reads both clusters through Spark's Kafka source (spark-sql-kafka-0-10, passed with --jars) at the
given offset ranges and compares a content hash per record:
sha256(hex(key) | hex(value) | headers (name:hex(value), in order) | timestamp in ms), nulls distinct
from empty. Per partition pair (source topic-partition -> target topic-partition):

  checksums       record count, sum and xor of a 60-bit hash prefix per side — order-independent, so
                  two drained ranges with equal figures hold the same multiset of records
  records         (not with --checksums-only) records matched by (hash, occurrence), records MISSING
                  on the target, EXTRA records on the target (foreign or duplicated), ORDER violations
                  (a matched record lands on the target before the one preceding it on the source)
  boundaries      (with --boundaries) for each group committed at C on the source and at T on the
                  target (both as read when the proof was prepared — the truth, not the plan): the
                  true target offset (the copy of the record at C), the records it will re-read
                  (copies of source offsets < C at >= T), skip (copies of source offsets >= C below T),
                  and whether the first record at >= T on the target is the first record at >= C on
                  the source (or both ends are reached). OK / RE-READ n / SKIP n / MISMATCH / MISSING
                  (nothing committed on the target) / UNPROVABLE (C or T outside the records read: the
                  truth cannot be established there; counted apart, never OK). The plan's offset is
                  carried as plan_offset and a difference flagged, never used as the reference.

The job fails (exit 1) on any count/checksum difference, MISSING, EXTRA or ORDER record, and on a
boundary that SKIPs, MISMATCHes, is MISSING or RE-READs more than --max-reread. UNPROVABLE rows do not
fail the job; they are counted in the summary (totals.boundary_unprovable).

Inputs:
  --source-bootstrap / --target-bootstrap, --source-option/--target-option K=V (passed as kafka.K,
  e.g. security.protocol=SASL_SSL), --kafka-options-file for secrets (not on the command line)
  --ranges PATH  Parquet: source_topic string, source_partition int, source_start long?,
                 source_end long?, target_topic string, target_partition int, target_start long?,
                 target_end long?   ([start, end); null = earliest / latest at job start)
  --topic SRC=TGT  (repeatable) whole topics, partition p paired with p, earliest to latest
  --boundaries PATH  Parquet: group string, source_topic string, source_partition int,
                 source_committed long, target_topic string, target_partition int, target_offset long?,
                 plan_offset long?

Outputs under --output: pairs/ (per pair figures), differences/ (MISSING, EXTRA, ORDER rows),
boundaries/ (per boundary figures); the JSON --summary names every failing pair, record and boundary.

Exit codes: 0 passed, 1 parity failed, 2 could not run. Needs only pyspark + the Kafka source jars.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

import parity_common as pc

APP = "record_parity"
PAIR = ["source_topic", "source_partition", "target_topic", "target_partition"]
EARLIEST, LATEST = -2, -1
# Pairs in memory: a whole-topic pair (--topic) has null partitions.
PAIRS = StructType([StructField(f.name, f.dataType, True) for f in pc.RANGES.fields])


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = pc.base_parser(APP, __doc__)
    parser.add_argument("--source-bootstrap", required=True)
    parser.add_argument("--target-bootstrap", required=True)
    parser.add_argument("--source-option", action="append", default=[], metavar="K=V")
    parser.add_argument("--target-option", action="append", default=[], metavar="K=V")
    parser.add_argument("--kafka-options-file", metavar="JSON",
                        help='{"source": {K: V}, "target": {K: V}}: client options kept off the command line '
                             "(SASL passwords); merged over --source-option/--target-option")
    parser.add_argument("--ranges", help="Parquet of partition pairs and offset ranges")
    parser.add_argument("--topic", action="append", default=[], metavar="SRC=TGT",
                        help="compare whole topics, partition p with p (repeatable)")
    parser.add_argument("--boundaries", help="Parquet of group boundaries to prove")
    parser.add_argument("--checksums-only", action="store_true",
                        help="only per-partition counts and checksums (no record matching, no boundaries)")
    parser.add_argument("--max-reread", type=int, default=None,
                        help="fail a boundary that re-reads more than this (default: re-reads never fail)")
    args = parser.parse_args(argv)
    if not args.ranges and not args.topic:
        parser.error("give --ranges and/or --topic")
    if args.checksums_only and args.boundaries:
        parser.error("--boundaries needs record matching; drop --checksums-only")
    for spec in args.topic:
        if spec.count("=") != 1 or not all(spec.split("=")):
            parser.error(f"--topic {spec!r}: use SRC=TGT")
    return args


def kafka_options(args: argparse.Namespace, side: str) -> dict[str, str]:
    """Spark Kafka source options for one side; values are never logged or put in the summary."""
    pairs: list[tuple[str, str]] = []
    for kv in getattr(args, f"{side}_option"):
        k, sep, v = kv.partition("=")
        if not sep or not k:
            raise pc.InputError(f"bad --{side}-option {k!r}: use K=V")
        pairs.append((k, v))
    if args.kafka_options_file:
        try:
            with open(args.kafka_options_file, encoding="utf-8") as fh:
                from_file = json.load(fh).get(side, {})
        except (OSError, ValueError, AttributeError) as exc:
            raise pc.InputError(f"cannot read --kafka-options-file {args.kafka_options_file}: {exc}") from exc
        pairs += [(str(k), str(v)) for k, v in from_file.items()]
    opts = {"kafka.bootstrap.servers": getattr(args, f"{side}_bootstrap"), "includeHeaders": "true"}
    opts.update({k if k.startswith("kafka.") else f"kafka.{k}": v for k, v in pairs})
    return opts


# -- which partitions and offsets to read ---------------------------------------------------------------
def load_pairs(spark: SparkSession, args: argparse.Namespace, io: pc.Files) -> list[dict[str, Any]]:
    """Pairs as dicts; a whole-topic pair has null partitions and offsets (p is paired with p)."""
    pairs: list[dict[str, Any]] = []
    if args.ranges:
        ranges = pc.read_snapshot(spark, args.ranges, pc.RANGES, "ranges", io)
        pc.validate(ranges, PAIR, PAIR, "ranges")
        pairs += pc.rows_as_dicts(ranges.collect())
    for spec in args.topic:
        src, tgt = spec.split("=")
        pairs.append({"source_topic": src, "target_topic": tgt, "source_partition": None, "target_partition": None,
                      "source_start": None, "source_end": None, "target_start": None, "target_end": None})
    for p in pairs:
        for side in ("source", "target"):
            s, e = p[f"{side}_start"], p[f"{side}_end"]
            if (s is not None and s < 0) or (e is not None and e < 0) or (s is not None and e is not None and e < s):
                raise pc.InputError(f"bad {side} range [{s}, {e}) for {pair_label(p)}")
    return pairs


def pair_label(p: dict[str, Any]) -> str:
    src = p["source_topic"] if p["source_partition"] is None else pc.tp_label(p["source_topic"], p["source_partition"])
    tgt = p["target_topic"] if p["target_partition"] is None else pc.tp_label(p["target_topic"], p["target_partition"])
    return f"{src} -> {tgt}"


def read_plan(pairs: list[dict[str, Any]], side: str) -> dict[str, dict[int, tuple[int, int]] | None]:
    """topic → {partition: (start, end)} to read on one side (None = every partition, earliest..latest).

    Several pairs on one partition are read once, over the union of their ranges.
    """
    plan: dict[str, dict[int, tuple[int, int]] | None] = {}
    for p in pairs:
        topic, part = p[f"{side}_topic"], p[f"{side}_partition"]
        if part is None:
            plan[topic] = None
            continue
        if topic in plan and plan[topic] is None:
            continue
        start = EARLIEST if p[f"{side}_start"] is None else p[f"{side}_start"]
        end = LATEST if p[f"{side}_end"] is None else p[f"{side}_end"]
        have = plan.setdefault(topic, {}).get(part)  # type: ignore[union-attr]
        if have is not None:
            start = EARLIEST if EARLIEST in (start, have[0]) else min(start, have[0])
            end = LATEST if LATEST in (end, have[1]) else max(end, have[1])
        plan[topic][part] = (start, end)  # type: ignore[index]
    return plan


def read_topic(spark: SparkSession, opts: dict[str, str], topic: str,
               parts: dict[int, tuple[int, int]] | None) -> DataFrame:
    reader = spark.read.format("kafka").options(**opts)
    if parts is None:
        reader = reader.option("subscribe", topic).option("startingOffsets", "earliest") \
            .option("endingOffsets", "latest")
    else:
        reader = (reader.option("assign", json.dumps({topic: sorted(parts)}))
                  .option("startingOffsets", json.dumps({topic: {str(p): s for p, (s, _) in parts.items()}}))
                  .option("endingOffsets", json.dumps({topic: {str(p): e for p, (_, e) in parts.items()}})))
    return reader.load()


def content_hash(df: DataFrame) -> DataFrame:
    """The record's identity across clusters: everything MM2 copies (not the offset)."""
    hex_or_null = lambda c: F.coalesce(F.hex(c), F.lit("~"))  # noqa: E731
    headers = F.coalesce(F.array_join(F.transform("headers", lambda h: F.concat(
        F.hex(h["key"]), F.lit(":"), hex_or_null(h["value"]))), ","), F.lit("~"))
    canon = F.concat_ws("|", hex_or_null(F.col("key")), hex_or_null(F.col("value")), headers,
                        F.unix_millis("timestamp").cast("string"))
    hashed = df.withColumn("hash", F.sha2(canon, 256))
    return hashed.select(
        "topic", "partition", "offset", "hash",
        F.conv(F.substring("hash", 1, 15), 16, 10).cast("long").alias("h60"),
        F.substring(F.col("key").cast("string"), 1, 80).alias("key_preview"))


def read_side(spark: SparkSession, opts: dict[str, str], pairs: list[dict[str, Any]], side: str) -> DataFrame:
    """Records of one side tagged with their pair, restricted to the pair's range; read once and persisted
    so every figure comes from the same snapshot of the topic."""
    frames = [content_hash(read_topic(spark, opts, t, parts)) for t, parts in read_plan(pairs, side).items()]
    records = frames[0]
    for f in frames[1:]:
        records = records.unionByName(f)
    p = spark.createDataFrame(pairs, schema=PAIRS)
    other = "target" if side == "source" else "source"
    r = records.alias("r")
    cond = ((F.col("r.topic") == p[f"{side}_topic"])
            & (p[f"{side}_partition"].isNull() | (F.col("r.partition") == p[f"{side}_partition"]))
            & (p[f"{side}_start"].isNull() | (F.col("r.offset") >= p[f"{side}_start"]))
            & (p[f"{side}_end"].isNull() | (F.col("r.offset") < p[f"{side}_end"])))
    tagged = r.join(F.broadcast(p), cond, "inner").select(
        F.col("r.topic").alias(f"{side}_topic"), F.col("r.partition").alias(f"{side}_partition"),
        p[f"{other}_topic"].alias(f"{other}_topic"),
        F.coalesce(p[f"{other}_partition"], F.col("r.partition")).alias(f"{other}_partition"),
        F.col("r.offset").alias("offset"), "r.hash", "r.h60", "r.key_preview")
    return tagged.select(*PAIR, "offset", "hash", "h60", "key_preview").persist(StorageLevel.MEMORY_AND_DISK)


# -- checks -------------------------------------------------------------------------------------------
def side_figures(df: DataFrame, side: str) -> DataFrame:
    return df.groupBy(*PAIR).agg(
        F.count(F.lit(1)).alias(f"{side}_records"),
        F.sum(F.col("h60").cast("decimal(38,0)")).cast("string").alias(f"{side}_sum"),
        F.bit_xor("h60").alias(f"{side}_xor"),
        F.min("offset").alias(f"{side}_first_offset"),
        F.max("offset").alias(f"{side}_last_offset"))


def match_records(src: DataFrame, tgt: DataFrame) -> DataFrame:
    """Pair records by (hash, n-th occurrence) within a partition pair; flag order violations."""
    occ = Window.partitionBy(*PAIR, "hash").orderBy("offset")
    s = src.withColumn("occ", F.row_number().over(occ)) \
        .select(*PAIR, "hash", "occ", "key_preview", F.col("offset").alias("source_offset"))
    t = tgt.withColumn("occ", F.row_number().over(occ)) \
        .select(*PAIR, "hash", "occ", F.col("key_preview").alias("target_key"), F.col("offset").alias("target_offset"))
    m = s.join(t, PAIR + ["hash", "occ"], "full_outer")
    kind = (F.when(F.col("target_offset").isNull(), F.lit("MISSING"))
            .when(F.col("source_offset").isNull(), F.lit("EXTRA")).otherwise(F.lit("MATCHED")))
    m = m.withColumn("kind", kind).withColumn("key_preview", F.coalesce("key_preview", "target_key")).drop("target_key")
    in_source_order = Window.partitionBy(*PAIR, F.col("kind")).orderBy("source_offset")
    prev = F.lag("target_offset").over(in_source_order)
    m = m.withColumn("previous_target_offset", F.when(F.col("kind") == "MATCHED", prev))
    m = m.withColumn("order_violation", F.coalesce(F.col("target_offset") < F.col("previous_target_offset"),
                                                   F.lit(False)))
    return m.select(*PAIR, "kind", "source_offset", "target_offset", "previous_target_offset", "order_violation",
                    "hash", "key_preview")


def match_figures(m: DataFrame) -> DataFrame:
    return m.groupBy(*PAIR).agg(
        F.sum((F.col("kind") == "MATCHED").cast("long")).alias("matched"),
        F.sum((F.col("kind") == "MISSING").cast("long")).alias("missing"),
        F.sum((F.col("kind") == "EXTRA").cast("long")).alias("extra"),
        F.sum(F.col("order_violation").cast("long")).alias("order_violations"))


def pair_table(spark: SparkSession, pairs: list[dict[str, Any]], src: DataFrame, tgt: DataFrame,
               matches: DataFrame | None) -> DataFrame:
    explicit = [{k: p[k] for k in PAIR} for p in pairs if p["source_partition"] is not None]
    keys = src.select(*PAIR).unionByName(tgt.select(*PAIR))
    if explicit:
        keys = keys.unionByName(spark.createDataFrame(explicit, schema=PAIRS).select(*PAIR))
    table = keys.distinct().join(side_figures(src, "source"), PAIR, "left").join(side_figures(tgt, "target"), PAIR, "left")
    table = table.fillna(0, subset=["source_records", "target_records"]).fillna("0", subset=["source_sum", "target_sum"])
    table = table.withColumn("checksum_equal", (F.col("source_records") == F.col("target_records"))
                             & (F.col("source_sum") == F.col("target_sum"))
                             & (F.coalesce("source_xor", F.lit(0)) == F.coalesce("target_xor", F.lit(0))))
    if matches is not None:
        table = table.join(match_figures(matches), PAIR, "left").fillna(0, subset=["matched", "missing", "extra",
                                                                                   "order_violations"])
        bad = (~F.col("checksum_equal") | (F.col("missing") > 0) | (F.col("extra") > 0)
               | (F.col("order_violations") > 0))
    else:
        bad = ~F.col("checksum_equal")
    return table.withColumn("failed", bad)


def covered(b: DataFrame, pairs: DataFrame) -> Column:
    """A boundary is provable only if C and T lie where records were read for its pair. T above the
    target's end is covered (everything from the copy of C to the end was read: that is what it skips)."""
    def inside(side: str, off: str, upper: bool) -> Column:
        ok = pairs[f"{side}_start"].isNull() | (b[off] >= pairs[f"{side}_start"])
        return ok & (pairs[f"{side}_end"].isNull() | (b[off] <= pairs[f"{side}_end"])) if upper else ok
    return inside("source", "source_committed", True) & inside("target", "target_offset", False)


def boundary_table(spark: SparkSession, args: argparse.Namespace, pairs: list[dict[str, Any]],
                   m: DataFrame, io: pc.Files) -> DataFrame:
    """Each group's position judged against the truth the records establish, never against the plan:
    with C committed on the source and T committed on the target (both read when the proof was prepared),
    the group re-reads the copies of source records below C that lie at or above T, and skips the copies
    of records at or above C that lie below T. `plan_offset` is carried beside, and any difference shown."""
    b = pc.read_snapshot(spark, args.boundaries, pc.BOUNDARIES, "boundaries", io)
    pc.validate(b, ["group", *PAIR], ["group", *PAIR, "source_committed"], "boundaries")
    p = spark.createDataFrame(pairs, schema=PAIRS)
    pair_match = ((b["source_topic"] == p["source_topic"]) & (b["target_topic"] == p["target_topic"])
                  & (p["source_partition"].isNull() | (b["source_partition"] == p["source_partition"]))
                  & (p["target_partition"].isNull() | (b["target_partition"] == p["target_partition"]))
                  & (p["source_partition"].isNotNull() | (b["source_partition"] == b["target_partition"])))
    judged = b.join(F.broadcast(p), pair_match, "left").groupBy(*[b[c] for c in b.columns]).agg(
        F.max(p["source_topic"].isNotNull() & F.coalesce(covered(b, p), F.lit(False))).alias("covered"))
    c, t = F.col("source_committed"), F.col("target_offset")
    s_off, t_off, kind = F.col("source_offset"), F.col("target_offset_m"), F.col("kind")
    mm = m.withColumnRenamed("target_offset", "target_offset_m")
    figures = judged.join(mm, PAIR, "left").groupBy("group", *PAIR, "source_committed", "target_offset",
                                                    "plan_offset").agg(
        F.sum(((kind == "MATCHED") & (s_off < c) & (t_off >= t)).cast("long")).alias("reread"),
        F.sum(((kind == "MATCHED") & (s_off >= c) & (t_off < t)).cast("long")).alias("skip"),
        F.sum(((kind == "MISSING") & (s_off >= c)).cast("long")).alias("missing_after"),
        F.sum(((kind == "EXTRA") & (t_off >= t)).cast("long")).alias("extra_after"),
        F.min(F.when((kind == "MATCHED") & (s_off >= c), t_off)).alias("true_offset"),
        F.min(F.when(s_off >= c, F.struct(s_off.alias("offset"), F.col("hash"), F.col("key_preview"))))
        .alias("next_source"),
        F.min(F.when(t_off >= t, F.struct(t_off.alias("offset"), F.col("hash"), F.col("key_preview"))))
        .alias("next_target"),
        F.first("covered").alias("covered"))
    figures = figures.fillna(0, subset=["reread", "skip", "missing_after", "extra_after"])
    exact = ((F.col("next_source").isNull() & F.col("next_target").isNull())
             | (F.col("next_source.hash") == F.col("next_target.hash")))
    status = (F.when(t.isNull(), F.lit("MISSING"))
              .when(~F.col("covered"), F.lit("UNPROVABLE"))
              .when(F.col("skip") > 0, F.lit("SKIP"))
              .when(F.col("reread") > 0, F.lit("RE-READ"))
              .when(~F.coalesce(exact, F.lit(False)), F.lit("MISMATCH"))
              .otherwise(F.lit("OK")))
    figures = figures.withColumn("exact", F.coalesce(exact, F.lit(False))).withColumn("status", status)
    figures = figures.withColumn("n", F.when(F.col("status") == "SKIP", F.col("skip"))
                                 .when(F.col("status") == "RE-READ", F.col("reread")).otherwise(F.lit(0)))
    figures = figures.withColumn("differs_from_plan", F.coalesce(t != F.col("plan_offset"), F.lit(False)))
    bad = F.col("status").isin("SKIP", "MISMATCH", "MISSING")
    if args.max_reread is not None:
        bad = bad | ((F.col("status") == "RE-READ") & (F.col("n") > args.max_reread))
    return figures.withColumn("failed", bad)


# -- reporting --------------------------------------------------------------------------------------------
def pair_failure(r: dict[str, Any]) -> dict[str, Any]:
    what = []
    if not r["checksum_equal"]:
        what.append(f"counts/checksums differ (source {r['source_records']} records sum {r['source_sum']}, "
                    f"target {r['target_records']} records sum {r['target_sum']})")
    for k, text in (("missing", "missing on the target"), ("extra", "extra on the target"),
                    ("order_violations", "order violation(s)")):
        if r.get(k):
            what.append(f"{r[k]} {text}")
    return {"check": "pair", "label": f"pair {pair_label(r)}", "reason": "; ".join(what), **r}


def difference_failure(r: dict[str, Any]) -> dict[str, Any]:
    if r["kind"] == "MISSING":
        reason = f"MISSING on the target: source offset {r['source_offset']}"
    elif r["kind"] == "EXTRA":
        reason = f"EXTRA on the target: target offset {r['target_offset']} matches no source record"
    else:
        reason = (f"ORDER: source offset {r['source_offset']} is at target offset {r['target_offset']}, "
                  f"before its predecessor's {r['previous_target_offset']}")
    return {"check": "record", "label": f"record {pair_label(r)}", "reason": f"{reason} (key {r['key_preview']!r})",
            **r}


def _describe(rec: dict[str, Any] | None) -> str:
    return "the end of the range" if rec is None else f"offset {rec['offset']} (key {rec['key_preview']!r})"


def boundary_failure(r: dict[str, Any], max_reread: int | None) -> dict[str, Any]:
    where = (f"source committed {r['source_committed']}, target committed {r['target_offset']}, "
             f"true target offset {r['true_offset']}"
             + (f"; the plan said {r['plan_offset']}" if r.get("differs_from_plan") else ""))
    ns, nt = r.get("next_source"), r.get("next_target")
    text = {
        "SKIP": f"SKIP {r['n']}",
        "RE-READ": f"RE-READ {r['n']} > --max-reread {max_reread}",
        "MISSING": "MISSING: nothing is committed on the target",
        "UNPROVABLE": "UNPROVABLE: the offsets lie outside the records read for this pair",
        "MISMATCH": f"MISMATCH: the group would resume on the target at {_describe(nt)}, "
                    f"but on the source it is at {_describe(ns)}",
    }.get(r["status"], r["status"])
    return {"check": "boundary", "label": f"group {r['group']} {pair_label(r)}", "reason": f"{text} ({where})", **r}


def summarize(args: argparse.Namespace, results: dict[str, DataFrame]) -> dict[str, Any]:
    limit = args.max_listed
    pairs = results["pairs"]
    sums = ["source_records", "target_records"] + ([] if args.checksums_only else
                                                   ["matched", "missing", "extra", "order_violations"])
    totals = pairs.agg(F.count(F.lit(1)).alias("pairs"), *[F.sum(c).alias(c) for c in sums],
                       F.sum((~F.col("checksum_equal")).cast("long")).alias("checksum_mismatches"),
                       F.sum(F.col("failed").cast("long")).alias("failed_pairs")).first().asDict()
    totals = {k: int(v or 0) for k, v in totals.items()}
    failures = [pair_failure(r) for r in pc.rows_as_dicts(pairs.filter("failed").orderBy(*PAIR).limit(limit).collect())]
    failures_total = totals["failed_pairs"]
    result: dict[str, Any] = {"totals": totals,
                              "pairs": pc.rows_as_dicts(pairs.orderBy(F.desc("failed"), *PAIR).limit(limit).collect())}
    if "boundaries" in results:
        b = results["boundaries"]
        counts = {r["status"]: r["n"] for r in b.groupBy("status").agg(F.count(F.lit(1)).alias("n")).collect()}
        result["boundary_counts"] = counts
        figures = b.agg(F.sum(F.when(F.col("status") == "RE-READ", F.col("n"))).alias("reread"),
                        F.sum(F.when(F.col("status") == "SKIP", F.col("n"))).alias("skip"),
                        F.sum(F.col("differs_from_plan").cast("long")).alias("differs_from_plan")).first()
        totals.update(boundary_reread=int(figures["reread"] or 0), boundary_skip=int(figures["skip"] or 0),
                      boundary_unprovable=int(counts.get("UNPROVABLE", 0)),
                      boundary_differs_from_plan=int(figures["differs_from_plan"] or 0))
        bad = pc.rows_as_dicts(b.filter("failed").orderBy("group", *PAIR).limit(limit).collect())
        failures += [boundary_failure(r, args.max_reread) for r in bad]
        failures_total += b.filter("failed").count()
        result["boundaries"] = pc.rows_as_dicts(b.orderBy(F.desc("failed"), "group", *PAIR).limit(limit).collect())
    if "differences" in results:
        d = results["differences"]
        n = d.count()
        totals["differences"] = n
        failures_total += n
        kind_order = F.array_position(F.array(F.lit("ORDER"), F.lit("EXTRA"), F.lit("MISSING")), F.col("kind"))
        rows = d.orderBy(kind_order, *PAIR, "source_offset", "target_offset").limit(max(0, limit - len(failures)))
        failures += [difference_failure(r) for r in pc.rows_as_dicts(rows.collect())]
    result.update(passed=failures_total == 0, failures=failures[:limit], failures_total=failures_total)
    return result


def body(args: argparse.Namespace, io: pc.Files = pc.FILES):
    def run(spark: SparkSession) -> dict[str, Any]:
        pairs = load_pairs(spark, args, io)
        src = read_side(spark, kafka_options(args, "source"), pairs, "source")
        tgt = read_side(spark, kafka_options(args, "target"), pairs, "target")
        out = args.output.rstrip("/")
        outputs = {"pairs": f"{out}/pairs"}
        results: dict[str, DataFrame] = {}
        matches = None
        try:
            if not args.checksums_only:
                matches = match_records(src, tgt).persist(StorageLevel.MEMORY_AND_DISK)
                outputs["differences"] = f"{out}/differences"
                differences = matches.filter((F.col("kind") != "MATCHED") | F.col("order_violation")).withColumn(
                    "kind", F.when(F.col("order_violation"), F.lit("ORDER")).otherwise(F.col("kind")))
                results["differences"] = io.store(differences, outputs["differences"])
            results["pairs"] = io.store(pair_table(spark, pairs, src, tgt, matches), outputs["pairs"])
            if args.boundaries:
                outputs["boundaries"] = f"{out}/boundaries"
                results["boundaries"] = io.store(boundary_table(spark, args, pairs, matches, io),
                                                 outputs["boundaries"])
            result = summarize(args, results)
        finally:  # a Spark Connect session outlives the job: free what it cached
            for cached in (src, tgt, matches):
                if cached is not None:
                    cached.unpersist()
        result["inputs"] = {"source_bootstrap": args.source_bootstrap, "target_bootstrap": args.target_bootstrap,
                            "ranges": args.ranges, "topics": args.topic, "boundaries": args.boundaries,
                            "mode": "checksums" if args.checksums_only else "records"}
        result["thresholds"] = {"max_reread": args.max_reread}
        result["outputs"] = outputs
        return result
    return run


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return pc.run_app(APP, args, body(args))


if __name__ == "__main__":
    sys.exit(main())
