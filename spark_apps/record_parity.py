"""Record parity: is the mirrored topic on the target the same records as the source topic, in order?

Reads both clusters at the given offset ranges — by default with the batched reader (--reader batched: the ranges
spread over a few tasks, each reading its ranges with one confluent-kafka consumer), else through Spark's Kafka
source (--reader kafka-source: spark-sql-kafka-0-10, passed with --jars; a task per partition) — and compares a
content hash per record (the same hash either way):
sha256(len(key):key | len(value):value | headers as JSON (names, base64 values, in order) | timestamp
in ms), nulls distinct from empty. Per partition pair (source topic-partition -> target topic-partition):

  checksums       record count, sum and xor of a 64-bit digest of each hash per side — order-independent,
                  so two drained ranges with equal figures hold the same multiset of records
  records         (not with --checksums-only) records matched by (hash, occurrence), records MISSING
                  on the target, EXTRA records on the target (foreign or duplicated), ORDER violations
                  (a matched record lands on the target before the one preceding it on the source)
  boundaries      (with --boundaries) for each group committed at C on the source and at T on the
                  target (both as read when the proof was prepared — the truth, not the plan): the
                  true target offset (the copy of the record at C), the records it will re-read
                  (copies of source offsets < C at >= T), skip (copies of source offsets >= C below T),
                  and whether the first record at >= T on the target is the first record at >= C on
                  the source (or both ends are reached). OK / RE-READ n / SKIP n / MISMATCH / MISSING
                  (nothing committed on the target) / UNPROVABLE (C or T outside the records read, or
                  the pair's records out of order: the truth cannot be established there; counted
                  apart, never OK). The plan's offset is carried as plan_offset and a difference
                  flagged, never used as the reference.

Transactions: a source partition that carries them (its range has `source_stable_end`: the last stable offset
when the proof was prepared) is also read `read_committed` up to there, and its records missing from that view
are its aborted records. Transaction markers are never records (no consumer is given one); aborted records are
not data: MirrorMaker 2's default source consumer copies them (read_uncommitted) and one configured
read_committed does not, so an aborted record is never MISSING, its copy is never EXTRA, and neither counts as a
record a group re-reads or skips, nor as the record it reads next. With --checksums-only there is no matching:
every data record counts, aborted ones included (what MM2's default source consumer copies).

The work is sized to the data: each side is read once (one Kafka scan per cluster), every row goes
through one shuffle by partition pair, and each pair's rows are placed in one Python pass on the executors
(--placement arrow: the records matched through a hash map, each boundary placed among its side's records
by bisection — never a join of every boundary with every record); --placement sql places them by window
sorts in Spark SQL instead, with the same answer. The verdict comes back to the driver in one answer (a row
per pair), which writes the outputs and the summary.

The job fails (exit 1) on any count/checksum difference, MISSING, EXTRA or ORDER record, and on a
boundary that SKIPs, MISMATCHes, is MISSING or RE-READs more than --max-reread. UNPROVABLE rows do not
fail the job; they are counted in the summary (totals.boundary_unprovable).

Inputs:
  --source-bootstrap / --target-bootstrap, --source-option/--target-option K=V (passed as kafka.K,
  e.g. security.protocol=SASL_SSL), --kafka-options-file for secrets (not on the command line): the Java
  options per side ("source", "target") and the librdkafka config the batched reader uses ("source_rdkafka",
  "target_rdkafka"); a secured side without one is read by the Kafka source
  --ranges PATH  Parquet: source_topic string, source_partition int, source_start long?,
                 source_end long?, target_topic string, target_partition int, target_start long?,
                 target_end long?   ([start, end); null = earliest / latest at job start)
  --topic SRC=TGT  (repeatable) whole topics, partition p paired with p, earliest to latest
  --boundaries PATH  Parquet: group string, source_topic string, source_partition int,
                 source_committed long, target_topic string, target_partition int, target_offset long?,
                 plan_offset long?

Outputs under --output: pairs/ (per pair figures), differences/ (MISSING, EXTRA, ORDER rows),
boundaries/ (per boundary figures); the JSON --summary names every failing pair, record and boundary.

Exit codes: 0 passed, 1 parity failed, 2 could not run. Needs pyspark + the Kafka source jars, and for the
batched reader confluent-kafka and pyarrow on the driver and the executors.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import sys
import time
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, BooleanType, LongType, StringType, StructField, StructType

import parity_common as pc

APP = "record_parity"
PAIR = ["source_topic", "source_partition", "target_topic", "target_partition"]
EARLIEST, LATEST = -2, -1
FETCH_MAX_WAIT_MS = "10"  # see kafka_options
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
    parser.add_argument("--reader", choices=READERS, default=DEFAULT_READER,
                        help="batched: a few tasks, each reading many partitions with one librdkafka consumer "
                             "(needs confluent-kafka on the executors); kafka-source: Spark's Kafka source, a task "
                             f"and a consumer per partition (default {DEFAULT_READER})")
    parser.add_argument("--read-tasks", type=int, default=None, metavar="N",
                        help="batched reader: read tasks per side (default twice the cluster's cores, at most "
                             f"{MAX_TASKS}); fewer tasks read more partitions each")
    parser.add_argument("--placement", choices=PLACEMENTS, default=DEFAULT_PLACEMENT,
                        help="arrow: each pair's records and boundaries placed in one Python pass (needs pyarrow on "
                             "the executors); sql: by window sorts in Spark SQL (the same answer, slower; default "
                             f"{DEFAULT_PLACEMENT})")
    args = parser.parse_args(argv)
    if args.read_tasks is not None and args.read_tasks < 1:
        parser.error("--read-tasks must be at least 1")
    if not args.ranges and not args.topic:
        parser.error("give --ranges and/or --topic")
    if args.checksums_only and args.boundaries:
        parser.error("--boundaries needs record matching; drop --checksums-only")
    for spec in args.topic:
        if spec.count("=") != 1 or not all(spec.split("=")):
            parser.error(f"--topic {spec!r}: use SRC=TGT")
    return args


def options_file(args: argparse.Namespace) -> dict[str, Any]:
    """The --kafka-options-file's content ({} without one): per side the Java client options ("source",
    "target") and the librdkafka config the batched reader uses ("source_rdkafka", "target_rdkafka")."""
    if not args.kafka_options_file:
        return {}
    try:
        with open(pc.shipped_file(args.kafka_options_file), encoding="utf-8") as fh:
            content = json.load(fh)
        if not isinstance(content, dict):
            raise ValueError("not a JSON object")
        return content
    except (OSError, ValueError) as exc:
        raise pc.InputError(f"cannot read --kafka-options-file {args.kafka_options_file}: {exc}") from exc


def kafka_options(args: argparse.Namespace, side: str) -> dict[str, str]:
    """Spark Kafka source options for one side; values are never logged or put in the summary."""
    pairs: list[tuple[str, str]] = []
    for kv in getattr(args, f"{side}_option"):
        k, sep, v = kv.partition("=")
        if not sep or not k:
            raise pc.InputError(f"bad --{side}-option {k!r}: use K=V")
        pairs.append((k, v))
    pairs += [(str(k), str(v)) for k, v in options_file(args).get(side, {}).items()]
    opts = {"kafka.bootstrap.servers": getattr(args, f"{side}_bootstrap"), "includeHeaders": "true",
            # Bounded reads of records already written: a fetch with nothing left to return must not be held
            # by the broker (500 ms by default). Spark's consumer meets that once per partition whose range
            # starts inside a record batch — 18 such partitions cost 4.5 s on 2 cores, measured
            # (benchmarks/record_proof.py prints both side by side); a client's own option, merged below, still wins.
            "kafka.fetch.max.wait.ms": FETCH_MAX_WAIT_MS}
    opts.update({k if k.startswith("kafka.") else f"kafka.{k}": v for k, v in pairs})
    return opts


# -- which partitions and offsets to read ---------------------------------------------------------------
def load_pairs(spark: SparkSession, args: argparse.Namespace, io: pc.Files) -> list[dict[str, Any]]:
    """Pairs as dicts, numbered in order; a whole-topic pair has null partitions and offsets (p is paired
    with p). The ranges are a handful of rows: read and checked here, by the driver."""
    pairs: list[dict[str, Any]] = []
    if args.ranges:
        ranges = io.rows(spark, args.ranges, pc.RANGES, "ranges")
        pc.check_rows(ranges, PAIR, PAIR, "ranges")
        pairs += ranges
    for spec in args.topic:
        src, tgt = spec.split("=")
        if any(p["source_topic"] == src and p["target_topic"] == tgt for p in pairs):
            raise pc.InputError(f"--topic {spec} repeats a pair of {src} -> {tgt} (whole topics, or in --ranges)")
        pairs.append({"source_topic": src, "target_topic": tgt, "source_partition": None, "target_partition": None,
                      "source_start": None, "source_end": None, "target_start": None, "target_end": None,
                      "source_stable_end": None})
    for p in pairs:
        for side in ("source", "target"):
            s, e = p[f"{side}_start"], p[f"{side}_end"]
            if (s is not None and s < 0) or (e is not None and e < 0) or (s is not None and e is not None and e < s):
                raise pc.InputError(f"bad {side} range [{s}, {e}) for {pair_label(p)}")
    return [{**p, "pair_no": i} for i, p in enumerate(pairs)]


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


def pool_group_id(opts: dict[str, str]) -> str:
    """A consumer group id naming these client options exactly, for the Kafka source's consumer pool.

    By default each query gets a fresh group id, so every task of every proof builds a new consumer;
    the pool keys consumers by (group id, partition), so with a stable id a warm server reuses them
    (a third of the read's cost, measured). Nothing joins or commits under this id: the executors assign
    partitions and seek. The id is a digest of every option, secrets included, because the pool refuses
    a key whose options changed — a rotated password simply gets new consumers. Only the digest is seen.
    """
    digest = hashlib.sha256(json.dumps(sorted(opts.items())).encode()).hexdigest()[:24]
    return f"mirrorbook-parity-{digest}"


def read_topics(spark: SparkSession, opts: dict[str, str], plan: dict[str, dict[int, tuple[int, int]] | None]
                ) -> DataFrame:
    """One Kafka relation for every assigned partition of one side (plus one for whole topics): one offset
    lookup and one scan per cluster, however many topics the pairs span."""
    reader = lambda: spark.read.format("kafka").options(**opts).option("kafka.group.id", pool_group_id(opts))  # noqa: E731
    assigned = {t: parts for t, parts in sorted(plan.items()) if parts is not None}
    whole = sorted(t for t, parts in plan.items() if parts is None)
    frames = []
    if assigned:
        frames.append(reader().option("assign", json.dumps({t: sorted(parts) for t, parts in assigned.items()}))
                      .option("startingOffsets", json.dumps({t: {str(p): s for p, (s, _) in parts.items()}
                                                             for t, parts in assigned.items()}))
                      .option("endingOffsets", json.dumps({t: {str(p): e for p, (_, e) in parts.items()}
                                                           for t, parts in assigned.items()})).load())
    if whole:
        frames.append(reader().option("subscribe", ",".join(whole)).option("startingOffsets", "earliest")
                      .option("endingOffsets", "latest").load())
    return frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])


def content_hash(df: DataFrame) -> DataFrame:
    """The record's identity across clusters: everything MM2 copies (not the offset). Key and value go in
    raw behind their length (null distinct from empty, no separator ambiguity, nothing to encode); the
    headers as JSON (names, base64 values, in order)."""
    field = lambda c: F.concat(F.coalesce(F.length(c).cast("string"), F.lit("-")), F.lit(":"),  # noqa: E731
                               F.coalesce(c.cast("string"), F.lit("")))
    canon = F.concat_ws("|", field(F.col("key")), field(F.col("value")), F.coalesce(F.to_json("headers"), F.lit("-")),
                        F.unix_millis("timestamp").cast("string"))
    return identified(df.withColumn("hash", F.sha2(canon, 256)))


def identified(df: DataFrame) -> DataFrame:
    """A record's columns as the proof carries them, from its `hash` and raw `key`: both readers end here, so the
    64-bit digest and the key's preview are Spark's own expressions whichever read the records. The hash travels as
    its 32 bytes, not 64 hex characters: it is the widest column of the shuffle that brings a pair's records
    together; what the proof reports shows it in hex again (`hex_hash`)."""
    # The preview made valid UTF-8 (U+FFFD for a bad byte): a binary key cast to a string keeps its bytes, and a Spark
    # Connect client cannot decode a string column holding invalid UTF-8 when the differences come back to it.
    return df.select("topic", "partition", "offset", F.unhex("hash").alias("hash"), F.xxhash64("hash").alias("h64"),
                     F.substring(F.make_valid_utf8(F.col("key").cast("string")), 1, 80).alias("key_preview"))


# -- the batched reader -----------------------------------------------------------------------------------
# Spark's Kafka source reads a partition per task with a consumer each: 1,200 tasks for 600 pairs, which
# dominated the proof at 1,000 groups. The batched reader spreads the same ranges over a few tasks, each reading
# all of its ranges with one librdkafka consumer (assign, never join or commit), hashing in Python exactly as
# `content_hash` does in SQL (tests/spark/test_record_hash.py holds the two to each other).
READERS = ("batched", "kafka-source")
DEFAULT_READER = "batched"
READ_TIMEOUT_S = 120.0  # a read that gets nothing for this long fails (the Kafka source's poll timeout)
ARROW_ROWS = 8192  # records per Arrow batch a read task yields
# consume() waits this long whenever fewer than ARROW_ROWS records are fetched — at least once per task, at its
# ranges' tails: 0.1 s cost 0.16 s a task (8 tasks of 108k records, measured), 10 ms next to nothing.
POLL_S = 0.01
READ_SCHEMA = "topic string, partition int, offset long, hash string, key binary"
UNITS = "task int, units array<struct<topic:string,partition:int,start:long,end:long>>"
SECURED = ("kafka.security.protocol", "kafka.sasl.", "kafka.ssl.")
_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _json_string(text: str) -> str:
    """A JSON string as Spark's to_json (Jackson) writes one: quote, backslash and \\b \\t \\n \\f \\r escaped
    short, other control characters as \\u00XX in upper-case hex, everything else as it is (no ASCII escaping)."""
    if all(c >= " " and c not in '"\\' for c in text):
        return f'"{text}"'
    return '"' + "".join(_JSON_ESCAPES.get(c) or (f"\\u{ord(c):04X}" if c < " " else c) for c in text) + '"'


def canonical_text(key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]] | None,
                   timestamp_ms: int) -> bytes:
    """`content_hash`'s canonical text, in Python: key and value raw behind their byte length ("-:" for null),
    the headers as to_json renders Spark's array<struct<key,value:binary>> (value base64, a null value's field
    left out as to_json leaves null fields out; no headers: "-"), the timestamp in ms; joined by "|"."""
    def field(b: bytes | None) -> bytes:
        return b"-:" if b is None else b"%d:%s" % (len(b), b)
    if headers is None:
        rendered = b"-"
    else:
        rendered = ("[" + ",".join('{"key":' + _json_string(k) + ("}" if v is None else
                                   ',"value":"' + base64.b64encode(v).decode("ascii") + '"}')
                                   for k, v in headers) + "]").encode("utf-8")
    return b"|".join((field(key), field(value), rendered, b"%d" % timestamp_ms))


def content_digest(key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]] | None,
                   timestamp_ms: int) -> str:
    """sha256 hex of `canonical_text`: the `hash` column `content_hash` computes."""
    return hashlib.sha256(canonical_text(key, value, headers, timestamp_ms)).hexdigest()


def rdkafka_config(args: argparse.Namespace, side: str, opts: dict[str, str]) -> dict[str, Any] | None:
    """The librdkafka config of one side's batched reader: what the options file ships for it, the bootstrap of
    the command line, and the Kafka source's bounded fetch wait in librdkafka's words. None when the side is
    secured (its Java options say so) but no librdkafka config was shipped: then only the Kafka source can
    read it. Never logged: it holds secrets."""
    shipped = options_file(args).get(f"{side}_rdkafka")
    if not isinstance(shipped, dict) and any(k.startswith(SECURED) for k in opts) \
            and opts.get("kafka.security.protocol", "PLAINTEXT").upper() != "PLAINTEXT":
        return None
    conf: dict[str, Any] = dict(shipped or {})
    conf["bootstrap.servers"] = getattr(args, f"{side}_bootstrap")
    conf.setdefault("fetch.wait.max.ms", opts["kafka.fetch.max.wait.ms"])
    return conf


def task_slots(spark: SparkSession) -> int:
    """Tasks for a stage that reads or shuffles: twice the cluster's cores, so its slots stay busy while a slow task
    finishes, and no more — each further task costs its scheduling and, after the shuffle, a sort of its own (the
    stream of 600 pairs on 2 cores: 34.6 s in 512 tasks, 16.7 s in 8, measured)."""
    try:
        cores = spark.sparkContext.defaultParallelism
    except Exception:  # noqa: BLE001 — a Spark Connect client has no SparkContext: ask the server's settings
        cores = int(spark.conf.get("spark.default.parallelism", None)
                    or spark.conf.get("spark.sql.shuffle.partitions", None) or 2)
    return max(1, min(MAX_TASKS, 2 * cores))


def read_units(conf: dict[str, Any], isolation: str, plan: dict[str, dict[int, tuple[int, int]] | None]
               ) -> list[tuple[str, int, int, int]]:
    """The plan as (topic, partition, start, end) ranges, on the driver: a whole topic's partitions from its
    metadata, earliest and latest from the watermarks now (as the Kafka source resolves them at job start; the
    high watermark as this isolation level sees it). A topic that does not exist has no partition to read, as
    the Kafka source's subscription finds none; empty ranges are dropped."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**conf, **_reader_settings(isolation)})
    try:
        units = []
        for topic, parts in sorted(plan.items()):
            if parts is None:
                meta = consumer.list_topics(topic, timeout=READ_TIMEOUT_S).topics.get(topic)
                found = sorted(meta.partitions) if meta is not None and meta.error is None else []
                parts = {p: (EARLIEST, LATEST) for p in found}
            for part, (start, end) in sorted(parts.items()):
                if EARLIEST in (start, end) or LATEST in (start, end):
                    low, high = consumer.get_watermark_offsets(TopicPartition(topic, part), timeout=READ_TIMEOUT_S,
                                                               cached=False)
                    start = low if start == EARLIEST else start
                    end = high if end == LATEST else end
                if end > start:
                    units.append((topic, part, start, end))
        return units
    finally:
        consumer.close()


def _reader_settings(isolation: str) -> dict[str, Any]:
    """A reader of assigned ranges: no group joined or committed (the id is only librdkafka's requirement), an
    offset out of range an error (as the Kafka source's failOnDataLoss), a partition's end an event."""
    return {"group.id": "mirrorbook-parity-reader", "enable.auto.commit": False, "enable.auto.offset.store": False,
            "auto.offset.reset": "error", "enable.partition.eof": True, "isolation.level": isolation}


def spread(units: list[tuple[str, int, int, int]], tasks: int) -> list[list[tuple[str, int, int, int]]]:
    """The ranges in `tasks` groups of about equal records: largest first, each to the least loaded group."""
    groups: list[list[tuple[str, int, int, int]]] = [[] for _ in range(max(1, min(tasks, len(units))))]
    load = [0] * len(groups)
    for u in sorted(units, key=lambda u: (u[2] - u[3], u[0], u[1])):
        i = load.index(min(load))
        groups[i].append(u)
        load[i] += u[3] - u[2]
    return groups


def read_task(conf: dict[str, Any], isolation: str, hashes: bool, timeout_s: float = READ_TIMEOUT_S):
    """mapInArrow's function: every range of the task's rows read with one consumer, each record as READ_SCHEMA
    (`hash` null without `hashes`). A closure over the config (secrets included): shipped to the executors with
    the task, never on a command line."""
    def run(batches: Any) -> Any:
        import pyarrow as pa
        from confluent_kafka import Consumer

        ranges = {(u["topic"], u["partition"]): (u["start"], u["end"])
                  for b in batches for units in b.column("units").to_pylist() for u in units}
        if not ranges:
            return
        schema = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                            ("hash", pa.string()), ("key", pa.binary())])
        cols: list[list[Any]] = [[], [], [], [], []]
        consumer = Consumer({**conf, **_reader_settings(isolation)})
        try:
            for m in _in_ranges(consumer, ranges, timeout_s):
                key = m.key()
                cols[0].append(m.topic())
                cols[1].append(m.partition())
                cols[2].append(m.offset())
                cols[3].append(content_digest(key, m.value(), m.headers(), m.timestamp()[1]) if hashes else None)
                cols[4].append(key)
                if len(cols[0]) >= ARROW_ROWS:
                    yield pa.RecordBatch.from_arrays([pa.array(c) for c in cols], schema=schema)
                    cols = [[], [], [], [], []]
            if cols[0]:
                yield pa.RecordBatch.from_arrays([pa.array(c) for c in cols], schema=schema)
        finally:
            consumer.close()
    return run


def _in_ranges(consumer: Any, ranges: dict[tuple[str, int], tuple[int, int]], timeout_s: float) -> Any:
    """The records of each [start, end) range, one consumer assigned to all of them.

    A range is done when a record at or past its last offset came, or a partition end event or the consumer's
    position reached its end: its last offsets may be transaction markers (or aborted records, read_committed),
    which no consumer is given. Records past an end (fetched with their batch) are dropped; a done partition is
    paused so nothing more is fetched for it."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    consumer.assign([TopicPartition(t, p, s) for (t, p), (s, _) in ranges.items()])
    pending = dict(ranges)
    deadline = time.monotonic() + timeout_s
    while pending:
        msgs = consumer.consume(num_messages=ARROW_ROWS, timeout=POLL_S)
        done = set()
        for m in msgs:
            tp, err = (m.topic(), m.partition()), m.error()
            if err is not None and err.code() != KafkaError._PARTITION_EOF:
                raise KafkaException(err)
            end = ranges[tp][1] if tp in ranges else -1
            if err is None and m.offset() < end:
                yield m
            if m.offset() >= end - (err is None):  # a record at end - 1, or the partition's end at >= end
                done.add(tp)
        if not msgs:
            done |= _reached(consumer, pending)
        done &= pending.keys()
        if done:  # one call for the batch: each pause is a round trip through librdkafka's queues
            consumer.pause([TopicPartition(t, q) for t, q in done])
            for tp in done:
                del pending[tp]
        if msgs or done:
            deadline = time.monotonic() + timeout_s
        elif time.monotonic() > deadline:
            raise TimeoutError(f"no record for {timeout_s:.0f}s reading "
                               + ", ".join(f"{t}-{q}" for t, q in sorted(pending)))


def _reached(consumer: Any, pending: dict[tuple[str, int], tuple[int, int]]) -> set[tuple[str, int]]:
    """The pending ranges whose end the consumer's position has reached (past trailing markers)."""
    from confluent_kafka import TopicPartition

    return {(p.topic, p.partition) for p in consumer.position([TopicPartition(t, q) for t, q in pending])
            if p.offset >= 0 and p.offset >= pending[(p.topic, p.partition)][1]}


class Reader:
    """How one side's records are read: `records` (READ_SCHEMA's columns through `identified`) and `offsets`
    (topic, partition, offset read_committed: the committed view of a transactional range)."""

    def records(self, plan: dict[str, dict[int, tuple[int, int]] | None]) -> DataFrame:
        raise NotImplementedError

    def offsets(self, plan: dict[str, dict[int, tuple[int, int]] | None]) -> DataFrame:
        raise NotImplementedError


class KafkaSourceReader(Reader):
    def __init__(self, spark: SparkSession, opts: dict[str, str]) -> None:
        self.spark, self.opts = spark, opts

    def records(self, plan: dict[str, dict[int, tuple[int, int]] | None]) -> DataFrame:
        return content_hash(read_topics(self.spark, self.opts, plan))

    def offsets(self, plan: dict[str, dict[int, tuple[int, int]] | None]) -> DataFrame:
        return read_topics(self.spark, {**self.opts, "kafka.isolation.level": "read_committed"}, plan).select(
            "topic", "partition", "offset")


class BatchedReader(Reader):
    """The records read as the Kafka source reads them (its isolation level: read_uncommitted unless the client's
    options say otherwise), in `tasks` tasks at most."""

    def __init__(self, spark: SparkSession, conf: dict[str, Any], opts: dict[str, str], tasks: int) -> None:
        self.spark, self.conf, self.tasks = spark, conf, tasks
        self.isolation = opts.get("kafka.isolation.level", "read_uncommitted")

    def _read(self, plan: dict[str, dict[int, tuple[int, int]] | None], isolation: str, hashes: bool) -> DataFrame:
        groups = spread(read_units(self.conf, isolation, plan), self.tasks)
        rows = [(i, [{"topic": t, "partition": p, "start": s, "end": e} for t, p, s, e in g])
                for i, g in enumerate(groups) if g]
        if not rows:
            return self.spark.createDataFrame([], READ_SCHEMA)
        units = self.spark.createDataFrame(rows, UNITS).repartition(len(rows))  # round-robin: a row per task
        return units.mapInArrow(read_task(self.conf, isolation, hashes), READ_SCHEMA)

    def records(self, plan: dict[str, dict[int, tuple[int, int]] | None]) -> DataFrame:
        return identified(self._read(plan, self.isolation, True))

    def offsets(self, plan: dict[str, dict[int, tuple[int, int]] | None]) -> DataFrame:
        return self._read(plan, "read_committed", False).select("topic", "partition", "offset")


READER_MODULES = ("confluent_kafka", "pyarrow")
_can_read: dict[str, bool] = {}  # per session: a Spark Connect client's process runs many proofs on one server


def executors_can_read(spark: SparkSession, modules: tuple[str, ...] = READER_MODULES) -> bool:
    """Whether this process (it resolves the ranges) and the executors' Python have what the batched reader
    imports, asked once per session by a one-row task (a fraction of a second): a cluster without confluent-kafka
    (docker-compose's Spark Connect image) is read by the Kafka source rather than failing the proof. The summary
    names the reader each side got."""
    import importlib.util

    if not all(importlib.util.find_spec(name) for name in modules):
        return False
    try:
        # A local master's Python workers run the driver's Python (a local spark-submit of ours sets both to one):
        # what was found here is there. A cold JVM's first job costs seconds: not spent on asking.
        if spark.sparkContext.master.startswith("local"):
            return True
    except Exception:  # noqa: BLE001 — a Spark Connect client has no SparkContext: the server's executors are asked
        pass
    key = f"{id(spark)}:{','.join(modules)}"
    if key not in _can_read:
        def probe(batches: Any) -> Any:
            import importlib

            import pyarrow as pa
            for b in batches:
                found = True
                for name in modules:
                    try:
                        importlib.import_module(name)
                    except ImportError:
                        found = False
                yield pa.RecordBatch.from_pylist([{"found": found}] * b.num_rows)
        try:
            _can_read[key] = all(r["found"] for r in spark.range(1).mapInArrow(probe, "found boolean").collect())
        except Exception:  # noqa: BLE001 — no pyarrow (or no Python) on the executors: mapInArrow itself fails
            _can_read[key] = False
    return _can_read[key]


def side_reader(spark: SparkSession, args: argparse.Namespace, side: str) -> Reader:
    """The reader --reader asks for; the Kafka source for a secured side whose librdkafka config was not shipped,
    or on a cluster whose executors cannot import the batched reader's modules."""
    opts = kafka_options(args, side)
    conf = rdkafka_config(args, side, opts) if args.reader == "batched" else None
    if conf is None or not executors_can_read(spark):
        return KafkaSourceReader(spark, opts)
    return BatchedReader(spark, conf, opts, args.read_tasks or task_slots(spark))


# -- one stream, one shuffle ------------------------------------------------------------------------------
# Every row the proof needs travels in one stream keyed by `pid`, the partition pair it belongs to:
# pair_no * PID_STRIDE (+ the partition, for a whole-topic pair). Rows of a pair meet in one task; from
# there every figure is a sort within the pair, never a join of one pair's rows with another's.
PID_STRIDE = 1 << 20  # above any partition number
SOURCE, TARGET, BOUNDARY, PAIR_ROW = 0, 1, 2, 3  # `kind`: a record of a side, a group's boundary, a pair
MAX_TASKS = 512  # tasks per stage at most, however many pairs (each is a few ms of scheduling)
BOUNDARY_FIELDS = ["group", *PAIR, "source_committed", "target_offset", "plan_offset", "covered"]


def pairs_frame(spark: SparkSession, pairs: list[dict[str, Any]]) -> DataFrame:
    return spark.createDataFrame([{k: p[k] for k in (*PAIRS.fieldNames(), "pair_no")} for p in pairs],
                                 schema=StructType([*PAIRS.fields, StructField("pair_no", LongType(), False)]))


def pid_col(p: DataFrame, partition: Column) -> Column:
    whole_topic = p["source_partition"].isNull()
    return p["pair_no"] * PID_STRIDE + F.when(whole_topic, partition).otherwise(F.lit(0)).cast("long")


def read_side(reader: Reader, pairs: list[dict[str, Any]], p: DataFrame, side: str) -> DataFrame:
    """One side's records in the pairs' ranges, each tagged with its pair: read once, in one scan. Source records of
    a pair with transactions are marked `aborted` when the committed view below its stable end lacks them."""
    r = reader.records(read_plan(pairs, side)).alias("r")
    cond = ((F.col("r.topic") == p[f"{side}_topic"])
            & (p[f"{side}_partition"].isNull() | (F.col("r.partition") == p[f"{side}_partition"]))
            & (p[f"{side}_start"].isNull() | (F.col("r.offset") >= p[f"{side}_start"]))
            & (p[f"{side}_end"].isNull() | (F.col("r.offset") < p[f"{side}_end"])))
    tagged = r.join(F.broadcast(p), cond, "inner")
    aborted = F.lit(False)
    committed_plan = read_plan(committed_view(pairs), side) if side == "source" else {}
    if committed_plan:
        committed = reader.offsets(committed_plan).select(
            F.col("topic").alias("c_topic"), F.col("partition").alias("c_partition"),
            F.col("offset").alias("c_offset"))
        tagged = tagged.join(committed, (F.col("r.topic") == F.col("c_topic"))
                             & (F.col("r.partition") == F.col("c_partition"))
                             & (F.col("r.offset") == F.col("c_offset")), "left")
        aborted = (p["source_stable_end"].isNotNull() & (F.col("r.offset") < p["source_stable_end"])
                   & F.col("c_offset").isNull())
    return tagged.select(
        pid_col(p, F.col("r.partition")).alias("pid"), F.lit(SOURCE if side == "source" else TARGET).alias("kind"),
        F.col("r.offset").alias("off"), "r.hash", "r.h64", "r.key_preview", aborted.alias("aborted"))


def committed_view(pairs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pairs with transactions, their source ranges ending at the stable end: what is read read_committed."""
    out = []
    for p in pairs:
        stable = p.get("source_stable_end")
        if stable is None or p["source_partition"] is None:
            continue
        end = stable if p["source_end"] is None else min(stable, p["source_end"])
        if p["source_start"] is None or end > p["source_start"]:
            out.append({**p, "source_end": end})
    return out


def covered(b: DataFrame, pairs: DataFrame) -> Column:
    """A boundary is provable only if C and T lie where records were read for its pair. T above the
    target's end is covered (everything from the copy of C to the end was read: that is what it skips)."""
    def inside(side: str, off: str, upper: bool) -> Column:
        ok = pairs[f"{side}_start"].isNull() | (b[off] >= pairs[f"{side}_start"])
        return ok & (pairs[f"{side}_end"].isNull() | (b[off] <= pairs[f"{side}_end"])) if upper else ok
    return inside("source", "source_committed", True) & inside("target", "target_offset", False)


def boundary_rows(b: DataFrame, p: DataFrame, twins: bool = True) -> DataFrame:
    """Each group's boundary as two rows of its pair's stream, one placed at C among the source records
    (axis 0) and one at T among the target records (axis 1) — or, without `twins`, one row (axis 0) for a placement
    that reads both offsets off it. No pair read: pid null, and UNPROVABLE."""
    match = ((b["source_topic"] == p["source_topic"]) & (b["target_topic"] == p["target_topic"])
             & (p["source_partition"].isNull() | (b["source_partition"] == p["source_partition"]))
             & (p["target_partition"].isNull() | (b["target_partition"] == p["target_partition"]))
             & (p["source_partition"].isNotNull() | (b["source_partition"] == b["target_partition"])))
    has_pair = p["pair_no"].isNotNull()
    fields = [b[c] for c in BOUNDARY_FIELDS[:-1]] + \
        [(has_pair & F.coalesce(covered(b, p), F.lit(False))).alias("covered")]
    return b.join(F.broadcast(p), match, "left").select(
        F.when(has_pair, pid_col(p, b["source_partition"])).alias("pid"), F.lit(BOUNDARY).alias("kind"),
        F.explode(F.array(F.lit(SOURCE), F.lit(TARGET))).alias("axis") if twins else F.lit(SOURCE).alias("axis"),
        F.struct(*fields).alias("b"))


def stream(spark: SparkSession, pairs: list[dict[str, Any]], p: DataFrame, src: DataFrame, tgt: DataFrame,
           boundaries: DataFrame | None, twins: bool = True) -> DataFrame:
    """Both sides' records, the boundaries and a row per explicit pair (so a pair with no records still
    has its figures), in one shuffle by pair: in `task_slots` tasks, or one per pair when there are fewer (a
    whole-topic pair's partitions are unknown until read: then the session's shuffle partitions, coalesced by
    AQE). Every row of a pair meets in one task whatever the count."""
    b_type = StructType([StructField(c, t, True) for c, t in
                         [(f.name, f.dataType) for f in pc.BOUNDARIES.fields if f.name in BOUNDARY_FIELDS]
                         + [("covered", BooleanType())]])
    records = [("off", LongType()), ("hash", BinaryType()), ("h64", LongType()), ("key_preview", StringType()),
               ("aborted", BooleanType())]
    nulls = lambda cols: [F.lit(None).cast(t).alias(c) for c, t in cols]  # noqa: E731
    rows = src.unionByName(tgt).select("pid", "kind", F.col("kind").alias("axis"), *[c for c, _ in records],
                                       *nulls([("b", b_type)]))
    explicit = p.filter(F.col("source_partition").isNotNull()).select(
        pid_col(p, F.lit(0)).alias("pid"), F.lit(PAIR_ROW).alias("kind"), F.lit(SOURCE).alias("axis"),
        *nulls(records), *nulls([("b", b_type)]))
    rows = rows.unionByName(explicit)
    if boundaries is not None:
        rows = rows.unionByName(boundary_rows(boundaries, p, twins).select("pid", "kind", "axis", *nulls(records), "b"))
    if any(q["source_partition"] is None for q in pairs):
        return rows.repartition("pid")
    return rows.repartition(max(1, min(len(pairs), task_slots(spark))), "pid")


def match(rows: DataFrame) -> DataFrame:
    """Records paired by (hash, n-th occurrence) within their pair, in one sort: the records of one
    content meet in a window, source ones first, each side in offset order; the k-th source record's
    copy is the k-th target record. A source row gets its copy's target offset (`t_copy`; null: MISSING),
    a target row learns whether a source record has its content and occurrence (`copied`; false: EXTRA).
    `junk`: an aborted source record, or a target record that is its copy — matched, never counted."""
    same = Window.partitionBy("pid", "hash").orderBy("kind", "off")
    whole = same.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    is_src = F.col("kind") == SOURCE
    rows = rows.select("*", F.row_number().over(same).alias("_n"),
                       F.sum(is_src.cast("int")).over(whole).cast("int").alias("_sources"),
                       F.collect_list(F.when(F.col("kind") == TARGET, F.col("off"))).over(whole).alias("_copies"),
                       F.collect_list(F.when(is_src, F.coalesce("aborted", F.lit(False)))).over(whole)
                       .alias("_aborted"))
    occ = F.when(is_src, F.col("_n")).otherwise(F.col("_n") - F.col("_sources")).cast("int")  # 1-based, per side
    copied = (F.col("kind") == TARGET) & (occ <= F.col("_sources"))
    return rows.select(*[c for c in rows.columns if not c.startswith("_")],
                       F.when(is_src, F.try_element_at("_copies", occ)).alias("t_copy"), copied.alias("copied"),
                       F.coalesce(F.when(is_src, F.col("aborted")).when(copied, F.try_element_at("_aborted", occ)),
                                  F.lit(False)).alias("junk"))


def walk(m: DataFrame) -> DataFrame:
    """Each boundary placed among its pair's records by one sort, never joined with them.

    Each side's records are walked from the end (axis 0: the source, axis 1: the target): a boundary at
    C on the source sees exactly the records at >= C — how many of them have a copy (`ge`) or have none
    (`lost`: MISSING), the nearest one (the record the group reads next there) and the lowest target
    offset of their copies (the true target offset); its twin at T on the target sees the copies and the
    EXTRA records at >= T. With the pair in order (copies' offsets rising with the source offsets) the
    matched records form one sequence on both sides, so a group re-reads ge(T) - ge(C) of them and skips
    ge(C) - ge(T) (see `verdict`). The same walk finds ORDER violations: a matched record whose
    successor's copy lies below its own copy."""
    kind, axis = F.col("kind"), F.col("axis")
    record = kind.isin(SOURCE, TARGET)
    junk = F.coalesce(F.col("junk"), F.lit(False))  # aborted records and their copies: matched, never counted
    m = m.select(
        "*", F.when(record, F.col("off")).when(axis == SOURCE, F.col("b.source_committed"))
        .otherwise(F.col("b.target_offset")).alias("at"),
        ((kind == SOURCE) & F.col("t_copy").isNotNull() & ~junk).alias("matched"),
        (((kind == SOURCE) & F.col("t_copy").isNull() & ~junk) | ((kind == TARGET) & ~F.col("copied"))).alias("lost"),
        (record & ~junk).alias("counted"),
        (kind == BOUNDARY).cast("int").alias("boundary_last"))  # at equal offsets a boundary sees the record
    count = lambda c: F.sum((F.col(c) if isinstance(c, str) else c).cast("long"))  # noqa: E731
    # Every figure in one select over one window: one sort (a select per figure would sort again).
    w = Window.partitionBy("pid", "axis").orderBy(F.desc_nulls_last("at"), "boundary_last")
    seen = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    successor = F.struct(F.col("off").alias("source_offset"), F.col("t_copy").alias("target_offset"), "hash",
                         "key_preview")
    m = m.select(
        "*", count(F.col("matched") | (F.col("copied") & F.col("counted"))).over(seen).alias("ge"),
        count("lost").over(seen).alias("lost_ge"),
        F.min(F.when(F.col("matched"), F.col("t_copy"))).over(seen).alias("true_offset"),
        F.last(F.when(F.col("counted"), F.struct(F.col("off").alias("offset"), "hash", "key_preview")), True)
        .over(seen).alias("nearest"),
        F.last(F.when(F.col("matched"), successor), True).over(w.rowsBetween(Window.unboundedPreceding, -1))
        .alias("successor"))
    return m.withColumn("order_violation", F.coalesce(F.col("matched") & (F.col("successor.target_offset")
                                                                             < F.col("t_copy")), F.lit(False)))


def hex_hash(h: Column) -> Column:
    """A record's hash as the proof reports it: sha256 in lower-case hex, as `content_digest` writes it."""
    return F.lower(F.hex(h))


def reported(record: Column) -> Column:
    """A nearest record (offset, hash, key preview) as reported: its hash in hex."""
    return F.when(record.isNotNull(), F.struct(record["offset"].alias("offset"), hex_hash(record["hash"]).alias("hash"),
                                                record["key_preview"].alias("key_preview")))


def verdict(at_c: Column, at_t: Column, ordered: Column, max_reread: int | None) -> Column:
    """A boundary's verdict from its two rows (at C on the source, at T on the target): the group's
    position judged against the truth the records establish, never against the plan (`plan_offset` is
    carried beside, and any difference shown)."""
    b = at_c["b"]
    t = b["target_offset"]
    reread = F.greatest(at_t["ge"] - at_c["ge"], F.lit(0))  # matched below C (rank(C)) less those below T
    skip = F.greatest(at_c["ge"] - at_t["ge"], F.lit(0))
    ns, nt = at_c["nearest"], F.when(t.isNotNull(), at_t["nearest"])
    exact = F.coalesce((ns.isNull() & nt.isNull()) | (ns["hash"] == nt["hash"]), F.lit(False))
    known = t.isNotNull() & b["covered"] & ordered
    status = (F.when(t.isNull(), F.lit("MISSING"))
              .when(~known, F.lit("UNPROVABLE"))
              .when(skip > 0, F.lit("SKIP"))
              .when(reread > 0, F.lit("RE-READ"))
              .when(~exact, F.lit("MISMATCH"))
              .otherwise(F.lit("OK")))
    n = F.when(status == "SKIP", skip).when(status == "RE-READ", reread).otherwise(F.lit(0))
    bad = status.isin("SKIP", "MISMATCH", "MISSING")
    if max_reread is not None:
        bad = bad | ((status == "RE-READ") & (n > max_reread))
    return F.struct(*[b[f].alias(f) for f in BOUNDARY_FIELDS[:-1]],
                    F.when(known, reread).otherwise(0).cast("long").alias("reread"),
                    F.when(known, skip).otherwise(0).cast("long").alias("skip"),
                    at_c["lost_ge"].alias("missing_after"), F.when(t.isNotNull(), at_t["lost_ge"]).alias("extra_after"),
                    F.when(t.isNotNull(), at_c["true_offset"]).alias("true_offset"),
                    reported(ns).alias("next_source"), reported(nt).alias("next_target"), b["covered"].alias("covered"),
                    ordered.alias("ordered"), exact.alias("exact"), status.alias("status"), n.cast("long").alias("n"),
                    F.coalesce(t != b["plan_offset"], F.lit(False)).alias("differs_from_plan"), bad.alias("failed"))


def difference_struct() -> Column:
    """MISSING and EXTRA records, and ORDER violations (reported on the record that broke the order)."""
    def row(kind: str, source: Column, target: Column, previous: Column, of: str = "") -> Column:
        return F.struct(F.lit(kind).alias("kind"), source.cast("long").alias("source_offset"),
                        target.cast("long").alias("target_offset"),
                        previous.cast("long").alias("previous_target_offset"),
                        F.lit(kind == "ORDER").alias("order_violation"), hex_hash(F.col(f"{of}hash")).alias("hash"),
                        F.col(f"{of}key_preview").alias("key_preview"))
    none = F.lit(None)
    return (F.when(F.col("lost") & (F.col("kind") == SOURCE), row("MISSING", F.col("off"), none, none))
            .when(F.col("lost"), row("EXTRA", none, F.col("off"), none))
            .when(F.col("order_violation"), row("ORDER", F.col("successor.source_offset"),
                                                F.col("successor.target_offset"), F.col("t_copy"), "successor.")))


def judge(rows: DataFrame, args: argparse.Namespace) -> DataFrame:
    """One row per pair: both sides' figures and, with matching, the differences and boundary verdicts as
    lists — everything the job reports, brought back in one answer."""
    is_src, is_tgt = F.col("kind") == SOURCE, F.col("kind") == TARGET
    count = lambda c: F.sum(c.cast("long"))  # noqa: E731
    side = lambda cond, name: [  # noqa: E731
        count(cond).alias(f"{name}_records"),
        F.sum(F.when(cond, F.col("h64")).cast("decimal(38,0)")).cast("string").alias(f"{name}_sum"),
        F.bit_xor(F.when(cond, F.col("h64"))).alias(f"{name}_xor"),
        F.min(F.when(cond, F.col("off"))).alias(f"{name}_first_offset"),
        F.max(F.when(cond, F.col("off"))).alias(f"{name}_last_offset")]
    # Matched, the source side is the records the target must hold: every committed record and the aborted ones
    # MM2 copied (its default source consumer reads uncommitted; one configured read_committed copies none).
    needed = is_src if args.checksums_only else is_src & ~(F.col("junk") & F.col("t_copy").isNull())
    figures = side(needed, "source") + side(is_tgt, "target")
    if not args.checksums_only:
        figures += [count(is_src & F.col("junk")).alias("aborted"),
                    count(is_tgt & F.col("junk")).alias("aborted_copies")]
    if not args.checksums_only:
        marker = lambda axis: F.when((F.col("kind") == BOUNDARY) & (F.col("axis") == axis), F.struct(  # noqa: E731
            "b", "ge", "lost_ge", "nearest", "true_offset"))
        figures += [count(F.col("matched")).alias("matched"), count(is_src & F.col("lost")).alias("missing"),
                    count(is_tgt & F.col("lost")).alias("extra"),
                    count(F.col("order_violation")).alias("order_violations"),
                    F.collect_list(difference_struct()).alias("differences"),
                    F.array_sort(F.collect_list(marker(SOURCE))).alias("at_c"),
                    F.array_sort(F.collect_list(marker(TARGET))).alias("at_t")]
    out = rows.groupBy("pid").agg(*figures).fillna(0, subset=["source_records", "target_records"]) \
        .fillna("0", subset=["source_sum", "target_sum"])
    equal = ((F.col("source_records") == F.col("target_records")) & (F.col("source_sum") == F.col("target_sum"))
             & (F.coalesce("source_xor", F.lit(0)) == F.coalesce("target_xor", F.lit(0))))
    if args.checksums_only:
        return out.withColumn("checksum_equal", equal).withColumn("failed", ~equal)
    # A boundary's two rows sort alike by their boundary (both start with it): zipped, they pair up.
    ordered = F.col("order_violations") == 0
    boundaries = F.transform(F.arrays_zip("at_c", "at_t"),
                             lambda z: verdict(z["at_c"], z["at_t"], ordered, args.max_reread))
    bad = ~equal | (F.col("missing") > 0) | (F.col("extra") > 0) | (F.col("order_violations") > 0)
    return out.select(*[c for c in out.columns if c not in ("at_c", "at_t")], boundaries.alias("boundaries"),
                      equal.alias("checksum_equal"), bad.alias("failed"))


# -- the same placement, one pass per pair in Python ---------------------------------------------------------
# match, walk and judge above place the records and boundaries by three window sorts over every row (at 1,000
# groups: ~900,000 rows on 2 cores, most of the proof's time). `placed` gets the same answer, row for row and in
# the same schema, from one Python pass per pair over its rows (a hash map for the matching, one sort per side
# for the walk, a bisection per boundary), on the executors through applyInArrow. The window pipeline stays for
# a cluster whose Python lacks pyarrow, and as its reference: tests/spark/test_proof_agrees_with_translation.py
# holds the two equal on synthetic logs with every fault the proof names.
PLACEMENTS = ("arrow", "sql")
DEFAULT_PLACEMENT = "arrow"


def placed(rows: DataFrame, args: argparse.Namespace) -> DataFrame:
    """`judge(walk(match(rows)), args)`, computed per pair by `place_pair`."""
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = judge(walk(match(rows)), args).schema  # the reference's schema: analysed, never run
    arrow_schema, max_reread = to_arrow_schema(schema), args.max_reread

    def run(table: Any) -> Any:
        import pyarrow as pa
        return pa.Table.from_pylist([place_pair(table.to_pydict(), max_reread)], schema=arrow_schema)
    return rows.groupBy("pid").applyInArrow(run, schema)


def _nearest(i: int | None, c: dict[str, list[Any]]) -> dict[str, Any] | None:
    if i is None:
        return None
    return {"offset": c["off"][i], "hash": _hex(c["hash"][i]), "key_preview": c["key_preview"][i]}


def _hex(h: bytes | None) -> str | None:
    """`hex_hash`, in Python."""
    return None if h is None else h.hex()


class _Axis:
    """One side's records in offset order, with what a boundary at offset x sees of those at >= x: how many count
    as copied (`ge`) or lost (`lost_ge`), the nearest counted record, the lowest copy of a matched one."""

    def __init__(self, rows: list[int], c: dict[str, list[Any]], copied_or_matched: list[bool], lost: list[bool],
                 counted: list[bool], t_copy: list[int | None]) -> None:
        import bisect

        self.bisect, self.c = bisect.bisect_left, c
        self.rows = sorted(rows, key=lambda i: c["off"][i])
        self.offs = [c["off"][i] for i in self.rows]
        n = len(self.rows)
        self.ge, self.lost_ge = [0] * (n + 1), [0] * (n + 1)
        self.nearest: list[int | None] = [None] * (n + 1)
        self.true_offset: list[int | None] = [None] * (n + 1)
        for k in range(n - 1, -1, -1):
            i = self.rows[k]
            self.ge[k] = self.ge[k + 1] + copied_or_matched[i]
            self.lost_ge[k] = self.lost_ge[k + 1] + lost[i]
            self.nearest[k] = i if counted[i] else self.nearest[k + 1]
            low = self.true_offset[k + 1]
            mine = t_copy[i] if copied_or_matched[i] else None
            self.true_offset[k] = mine if low is None or (mine is not None and mine < low) else low

    def at(self, x: int | None) -> dict[str, Any]:
        k = 0 if x is None else self.bisect(self.offs, x)  # null sorts last: it sees every record
        return {"ge": self.ge[k], "lost_ge": self.lost_ge[k], "nearest": _nearest(self.nearest[k], self.c),
                "true_offset": self.true_offset[k]}


def place_pair(c: dict[str, list[Any]], max_reread: int | None) -> dict[str, Any]:
    """One pair's row of `judge`, from its rows (columns as lists): the rules of match, walk, judge and verdict."""
    n = len(c["kind"])
    kind, off, aborted = c["kind"], c["off"], c["aborted"]
    src = [i for i in range(n) if kind[i] == SOURCE]
    tgt = [i for i in range(n) if kind[i] == TARGET]
    # match: the k-th source record of a content (in offset order) is copied by the k-th target record of it
    by_hash: dict[str, tuple[list[int], list[int]]] = {}
    for side, rows in ((0, src), (1, tgt)):
        for i in sorted(rows, key=lambda i: off[i]):
            by_hash.setdefault(c["hash"][i], ([], []))[side].append(i)
    t_copy: list[int | None] = [None] * n
    copied, junk = [False] * n, [False] * n
    for sources, targets in by_hash.values():
        for k, i in enumerate(sources):
            junk[i] = bool(aborted[i])
            if k < len(targets):
                t_copy[i] = off[targets[k]]
        for k, j in enumerate(targets[:len(sources)]):
            copied[j], junk[j] = True, bool(aborted[sources[k]])
    is_src, is_tgt = [k == SOURCE for k in kind], [k == TARGET for k in kind]
    matched = [is_src[i] and t_copy[i] is not None and not junk[i] for i in range(n)]
    lost = [(is_src[i] and t_copy[i] is None and not junk[i]) or (is_tgt[i] and not copied[i]) for i in range(n)]
    counted = [(is_src[i] or is_tgt[i]) and not junk[i] for i in range(n)]
    # walk: ORDER — a matched record whose successor's copy lies below its own copy
    chain = sorted((i for i in src if matched[i]), key=lambda i: off[i])
    differences: list[dict[str, Any]] = []
    order_violations = 0
    for prev, nxt in zip(chain, chain[1:]):
        if t_copy[nxt] < t_copy[prev]:  # type: ignore[operator]
            order_violations += 1
            differences.append({"kind": "ORDER", "source_offset": off[nxt], "target_offset": t_copy[nxt],
                                "previous_target_offset": t_copy[prev], "order_violation": True,
                                "hash": _hex(c["hash"][nxt]), "key_preview": c["key_preview"][nxt]})
    for i in range(n):
        if lost[i]:
            missing = is_src[i]
            differences.append({"kind": "MISSING" if missing else "EXTRA", "source_offset": off[i] if missing else None,
                                "target_offset": None if missing else off[i], "previous_target_offset": None,
                                "order_violation": False, "hash": _hex(c["hash"][i]),
                                "key_preview": c["key_preview"][i]})
    # judge: each side's figures
    needed = [i for i in src if not (junk[i] and t_copy[i] is None)]
    out: dict[str, Any] = {"pid": c["pid"][0] if n else None}
    for name, rows in (("source", needed), ("target", tgt)):
        h64 = [c["h64"][i] for i in rows]
        xor = 0
        for h in h64:
            xor ^= h
        out.update({f"{name}_records": len(rows), f"{name}_sum": str(sum(h64)), f"{name}_xor": xor if rows else None,
                    f"{name}_first_offset": min((off[i] for i in rows), default=None),
                    f"{name}_last_offset": max((off[i] for i in rows), default=None)})
    out.update(aborted=sum(1 for i in src if junk[i]), aborted_copies=sum(1 for i in tgt if junk[i]),
               matched=sum(matched), missing=sum(1 for i in src if lost[i]), extra=sum(1 for i in tgt if lost[i]),
               order_violations=order_violations, differences=differences)
    # the boundaries, each placed among its side's records by bisection
    axis_c = _Axis(src, c, matched, lost, counted, t_copy)
    axis_t = _Axis(tgt, c, [copied[i] and counted[i] for i in range(n)], lost, counted, t_copy)
    ordered = order_violations == 0
    marks = sorted((c["b"][i] for i in range(n) if kind[i] == BOUNDARY),  # one row each (stream's twins=False)
                   key=lambda b: tuple((v is not None, v) for v in b.values()))
    out["boundaries"] = [_verdict(b, axis_c.at(b["source_committed"]), axis_t.at(b["target_offset"]), ordered,
                                  max_reread) for b in marks]
    equal = (out["source_records"] == out["target_records"] and out["source_sum"] == out["target_sum"]
             and (out["source_xor"] or 0) == (out["target_xor"] or 0))
    out.update(checksum_equal=equal, failed=not equal or bool(out["missing"] or out["extra"] or order_violations))
    return out


def _verdict(b: dict[str, Any], at_c: dict[str, Any], at_t: dict[str, Any], ordered: bool,
             max_reread: int | None) -> dict[str, Any]:
    """`verdict`'s rules, for one boundary."""
    t = b["target_offset"]
    reread, skip = max(at_t["ge"] - at_c["ge"], 0), max(at_c["ge"] - at_t["ge"], 0)
    ns, nt = at_c["nearest"], at_t["nearest"] if t is not None else None
    exact = (ns is None and nt is None) or (ns is not None and nt is not None and ns["hash"] == nt["hash"])
    known = t is not None and bool(b["covered"]) and ordered
    status = ("MISSING" if t is None else "UNPROVABLE" if not known else "SKIP" if skip > 0
              else "RE-READ" if reread > 0 else "MISMATCH" if not exact else "OK")
    count = skip if status == "SKIP" else reread if status == "RE-READ" else 0
    bad = status in ("SKIP", "MISMATCH", "MISSING") or (
        max_reread is not None and status == "RE-READ" and count > max_reread)
    return {**{f: b[f] for f in BOUNDARY_FIELDS[:-1]}, "reread": reread if known else 0, "skip": skip if known else 0,
            "missing_after": at_c["lost_ge"], "extra_after": at_t["lost_ge"] if t is not None else None,
            "true_offset": at_c["true_offset"] if t is not None else None, "next_source": ns, "next_target": nt,
            "covered": b["covered"], "ordered": ordered, "exact": exact, "status": status, "n": count,
            "differs_from_plan": t is not None and b["plan_offset"] is not None and t != b["plan_offset"],
            "failed": bad}


def unpack(result: DataFrame, rows: list[dict[str, Any]], pairs: list[dict[str, Any]]
           ) -> dict[str, tuple[list[dict[str, Any]], StructType]]:
    """The answer as result tables (rows, schema): pairs, and with matching differences and boundaries."""
    pair_fields = [f for f in PAIRS.fields if f.name in PAIR]
    figures = [f for f in result.schema.fields if f.name not in ("pid", "differences", "boundaries")]
    tables: dict[str, tuple[list[dict[str, Any]], StructType]] = {
        "pairs": ([], StructType(pair_fields + figures))}
    lists = [n for n in ("differences", "boundaries") if n in result.columns]
    for name in lists:
        element = result.schema[name].dataType.elementType  # type: ignore[attr-defined]
        tables[name] = ([], StructType((pair_fields if name == "differences" else []) + element.fields))
    for r in rows:
        for b in r.get("boundaries") or []:
            tables["boundaries"][0].append(b)
        if r["pid"] is None:  # boundaries of no pair read
            continue
        p = pairs[r["pid"] // PID_STRIDE]
        part = p["source_partition"] if p["source_partition"] is not None else r["pid"] % PID_STRIDE
        key = {"source_topic": p["source_topic"], "source_partition": part, "target_topic": p["target_topic"],
               "target_partition": p["target_partition"] if p["target_partition"] is not None else part}
        tables["pairs"][0].append({**key, **{f.name: r[f.name] for f in figures}})
        for d in r.get("differences") or []:
            tables["differences"][0].append({**key, **d})
    return tables


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
        "UNPROVABLE": "UNPROVABLE: " + ("the offsets lie outside the records read for this pair" if not r["covered"]
                                        else "the pair's records are out of order on the target (its ORDER rows): "
                                             "no count of re-reads and skips is proven there"),
        "MISMATCH": f"MISMATCH: the group would resume on the target at {_describe(nt)}, "
                    f"but on the source it is at {_describe(ns)}",
    }.get(r["status"], r["status"])
    return {"check": "boundary", "label": f"group {r['group']} {pair_label(r)}", "reason": f"{text} ({where})", **r}


KIND_ORDER = {"ORDER": 0, "EXTRA": 1, "MISSING": 2}


def summarize(args: argparse.Namespace, tables: dict[str, tuple[list[dict[str, Any]], StructType]]
              ) -> dict[str, Any]:
    """The summary from the rows the driver holds (a few per pair and group): no further query."""
    limit = args.max_listed
    pairs = tables["pairs"][0]
    sums = ["source_records", "target_records"] + ([] if args.checksums_only else
                                                   ["matched", "missing", "extra", "order_violations", "aborted",
                                                    "aborted_copies"])
    totals = {"pairs": len(pairs), **{c: sum(int(r[c] or 0) for r in pairs) for c in sums},
              "checksum_mismatches": sum(1 for r in pairs if not r["checksum_equal"]),
              "failed_pairs": sum(1 for r in pairs if r["failed"])}
    in_order = sorted(pairs, key=lambda r: pc.sort_key(r, *PAIR))
    failures = [pair_failure(r) for r in in_order if r["failed"]][:limit]
    failures_total = totals["failed_pairs"]
    result: dict[str, Any] = {"totals": totals,
                              "pairs": sorted(in_order, key=lambda r: not r["failed"])[:limit]}
    if "boundaries" in tables:
        b = sorted(tables["boundaries"][0], key=lambda r: pc.sort_key(r, "group", *PAIR))
        counts: dict[str, int] = {}
        for r in b:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        result["boundary_counts"] = counts
        totals.update(boundary_reread=sum(r["n"] for r in b if r["status"] == "RE-READ"),
                      boundary_skip=sum(r["n"] for r in b if r["status"] == "SKIP"),
                      boundary_unprovable=counts.get("UNPROVABLE", 0),
                      boundary_differs_from_plan=sum(1 for r in b if r["differs_from_plan"]))
        bad = [r for r in b if r["failed"]]
        failures += [boundary_failure(r, args.max_reread) for r in bad[:limit]]
        failures_total += len(bad)
        result["boundaries"] = sorted(b, key=lambda r: not r["failed"])[:limit]
    if "differences" in tables:
        d = tables["differences"][0]
        totals["differences"] = len(d)
        failures_total += len(d)
        d = sorted(d, key=lambda r: (KIND_ORDER[r["kind"]], *pc.sort_key(r, *PAIR, "source_offset", "target_offset")))
        failures += [difference_failure(r) for r in d[:max(0, limit - len(failures))]]
    result.update(passed=failures_total == 0, failures=failures[:limit], failures_total=failures_total)
    return result


def proof_tables(spark: SparkSession, args: argparse.Namespace, pairs: list[dict[str, Any]],
                 readers: dict[str, Reader], boundaries: DataFrame | None
                 ) -> dict[str, tuple[list[dict[str, Any]], StructType]]:
    """The proof itself, from the pairs, each side's reader and the boundaries: one shuffle, one answer, as tables.
    (tests/spark/test_proof_agrees_with_translation.py runs it on synthetic logs beside precise translation.)"""
    p = pairs_frame(spark, pairs)
    src = read_side(readers["source"], pairs, p, "source")
    tgt = read_side(readers["target"], pairs, p, "target")
    if args.checksums_only:
        result = judge(stream(spark, pairs, p, src, tgt, boundaries), args)
    elif placement(spark, args) == "arrow":  # a boundary's one row serves both its offsets
        result = placed(stream(spark, pairs, p, src, tgt, boundaries, twins=False), args)
    else:
        result = judge(walk(match(stream(spark, pairs, p, src, tgt, boundaries))), args)
    return unpack(result, pc.collect_dicts(result), pairs)


def placement(spark: SparkSession, args: argparse.Namespace) -> str:
    """--placement, unless the executors' Python cannot import pyarrow: then the window pipeline (same answer)."""
    chosen = getattr(args, "placement", DEFAULT_PLACEMENT)
    return chosen if chosen == "sql" or executors_can_read(spark, ("pyarrow",)) else "sql"


def body(args: argparse.Namespace, io: pc.Files = pc.FILES):
    def run(spark: SparkSession) -> dict[str, Any]:
        pairs = load_pairs(spark, args, io)
        readers = {side: side_reader(spark, args, side) for side in ("source", "target")}
        boundaries = io.kept(pc.read_snapshot(spark, args.boundaries, pc.BOUNDARIES, "boundaries", io)) \
            if args.boundaries else None
        tables = proof_tables(spark, args, pairs, readers, boundaries)
        if args.boundaries:
            pc.check_rows(tables["boundaries"][0], ["group", *PAIR], ["group", *PAIR, "source_committed"],
                          "boundaries")
        else:
            tables.pop("boundaries", None)
        out = args.output.rstrip("/")
        outputs = {name: f"{out}/{name}" for name in tables}
        for name, (table_rows, schema) in tables.items():
            io.store_rows(spark, table_rows, schema, outputs[name])
        result_summary = summarize(args, tables)
        result_summary["inputs"] = {"source_bootstrap": args.source_bootstrap,
                                    "target_bootstrap": args.target_bootstrap, "ranges": args.ranges,
                                    "topics": args.topic, "boundaries": args.boundaries,
                                    "mode": "checksums" if args.checksums_only else "records",
                                    "readers": {side: "batched" if isinstance(r, BatchedReader) else "kafka-source"
                                                for side, r in readers.items()},
                                    "placement": None if args.checksums_only else placement(spark, args)}
        result_summary["thresholds"] = {"max_reread": args.max_reread}
        result_summary["outputs"] = outputs
        return result_summary
    return run


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return pc.run_app(APP, args, body(args))


if __name__ == "__main__":
    sys.exit(main())
