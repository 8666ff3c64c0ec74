"""Shared plumbing of mirrorbook's parity apps: input schemas, reading snapshots, the JSON summary, exit codes.

Ship it next to the app with `spark-submit --py-files spark_apps/parity_common.py`. It imports only
pyspark and the standard library, so the apps run on any Spark 4.x cluster.

The schemas here are the contract with the collector (include/mirrorbook/parity/schemas.py holds the
same schemas as pyarrow; a test keeps the two in step).

Exit codes: 0 = every check passed, 1 = a parity check failed (rows named on stderr and in the
summary), 2 = the job could not run (bad arguments, unreadable or malformed input, Spark error).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import traceback
from typing import Any, Callable, Iterable, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

SUMMARY_VERSION = 1
EXIT_PASSED, EXIT_FAILED, EXIT_ERROR = 0, 1, 2
DEFAULT_LISTED = 200  # failing rows copied into the summary and stderr; all of them are in the Parquet output


def _schema(*fields: tuple[str, Any, bool]) -> StructType:
    return StructType([StructField(name, typ, nullable) for name, typ, nullable in fields])


S, INT, L = StringType(), IntegerType(), LongType()

# -- snapshot inputs (Parquet) -------------------------------------------------------------------------
EXPECTED = _schema(
    ("cluster", S, False),            # where the group's offsets are checked (e.g. "B" after a failover)
    ("group", S, False),
    ("topic", S, False),              # topic name on `cluster` (e.g. "A.orders")
    ("partition", INT, False),
    ("expected_offset", L, False),    # what the runbook wrote / expects to find committed
    ("true_offset", L, True),         # offset of the record the group reads next, when proven; else null
    ("source_cluster", S, True),      # provenance, carried into the results
    ("source_topic", S, True),
    ("source_partition", INT, True),
    ("source_committed", L, True),
)
ACTUAL = _schema(
    ("cluster", S, False),
    ("group", S, False),
    ("topic", S, False),
    ("partition", INT, False),
    ("committed_offset", L, False),
)
WATERMARKS = _schema(
    ("cluster", S, False),
    ("topic", S, False),
    ("partition", INT, False),
    ("low", L, False),
    ("high", L, False),
)
RANGES = _schema(                     # one row per partition pair to compare; offsets are [start, end)
    ("source_topic", S, False),
    ("source_partition", INT, False),
    ("source_start", L, True),        # null = earliest
    ("source_end", L, True),          # null = latest (at job start)
    ("target_topic", S, False),
    ("target_partition", INT, False),
    ("target_start", L, True),
    ("target_end", L, True),
    ("source_stable_end", L, True),   # set: the source partition carries transactions (its last stable offset)
)
BOUNDARIES = _schema(                 # where a group stops on the source (C) and resumes on the target (T)
    ("group", S, False),
    ("source_topic", S, False),
    ("source_partition", INT, False),
    ("source_committed", L, False),   # C: committed on the source, read when the proof was prepared
    ("target_topic", S, False),
    ("target_partition", INT, False),
    ("target_offset", L, True),       # T: committed on the target, read then (null: nothing committed)
    ("plan_offset", L, True),         # what the runbook planned to write: reported beside, never the reference
)
SCHEMAS = {"expected": EXPECTED, "actual": ACTUAL, "watermarks": WATERMARKS, "ranges": RANGES,
           "boundaries": BOUNDARIES}


class InputError(Exception):
    """The job cannot judge anything: bad arguments or a malformed snapshot."""


class Files:
    """Snapshots and results as files the Spark driver reads and writes (the job run by spark-submit)."""

    def frame(self, spark: SparkSession, path: str) -> DataFrame:
        return spark.read.parquet(path)

    def columns(self, df: DataFrame, path: str) -> list[str]:
        return df.columns

    def rows(self, spark: SparkSession, path: str, schema: StructType, what: str) -> list[dict[str, Any]]:
        """A small snapshot (a job's list of partition pairs) as Python rows, conformed to `schema`."""
        return rows_as_dicts(read_snapshot(spark, path, schema, what, self).collect())

    def kept(self, df: DataFrame) -> DataFrame:
        """A big snapshot, as the job's queries read it: the files themselves."""
        return df

    def store(self, df: DataFrame, path: str) -> DataFrame:
        """Write a result; return it as a DataFrame to summarize from (read back: cheaper than caching)."""
        df.write.mode("overwrite").parquet(path)
        return df.sparkSession.read.parquet(path)

    def store_rows(self, spark: SparkSession, rows: list[dict[str, Any]], schema: StructType, path: str) -> None:
        """Write a result the driver already holds (a few rows per partition pair or group)."""
        spark.createDataFrame(rows, schema=schema).write.mode("overwrite").parquet(path)

    def check(self, df: DataFrame, path: str, schema: StructType, key: Sequence[str], required: Sequence[str],
              what: str) -> None:
        """Reject a small snapshot with duplicate keys or null required values (`validate`), where it is."""
        validate(df, key, required, what)


class Arrow(Files):
    """The job run by a Spark Connect client (the Airflow task): the client reads the snapshots from its
    own disk into Arrow tables that travel to the server inside the plan, and writes the results it
    collects back. The server never needs a path of the client's, nor the client a file of the server's."""

    def __init__(self) -> None:
        self._tables: dict[str, Any] = {}  # each snapshot, read once (its file may be gone by the next use)

    def _table(self, path: str) -> Any:
        import pyarrow.parquet as pq
        if path not in self._tables:
            try:
                self._tables[path] = pq.read_table(path)
            except OSError as exc:
                raise InputError(f"cannot read {path}: {exc}") from exc
        return self._tables[path]

    def frame(self, spark: SparkSession, path: str) -> DataFrame:
        from pyspark.sql.pandas.types import from_arrow_schema

        table = self._table(path)  # the schema given: an empty snapshot (no group committed) has no rows to infer it
        return spark.createDataFrame(table, schema=from_arrow_schema(table.schema))

    def columns(self, df: DataFrame, path: str) -> list[str]:
        """Known here: asking the server would cost an analysis round trip."""
        return self._table(path).column_names

    def rows(self, spark: SparkSession, path: str, schema: StructType, what: str) -> list[dict[str, Any]]:
        """Read here: no round trip to the server for what this process holds already."""
        table = self._table(path)
        require_columns(table.column_names, schema, what, path)
        return [{f.name: r.get(f.name) for f in schema.fields} for r in table.to_pylist()]

    def check(self, df: DataFrame, path: str, schema: StructType, key: Sequence[str], required: Sequence[str],
              what: str) -> None:
        """Checked here, on the rows this process read: no round trip to the server."""
        check_rows(self.rows(df.sparkSession, path, schema, what), key, required, what)

    def kept(self, df: DataFrame) -> DataFrame:
        """Kept on the server once, so the requests after name it rather than carry its rows. Inline, a snapshot
        of 149,100 rows (1,000 groups) is carried by every request: each schema analysis of the record proof cost
        about 0.5 s and each query 2.4-3.2 s; the group proof's classification took 14.3-17.5 s, against 2.5-2.9 s
        once its two snapshots were kept (4.5 s for both). Measured on the devstack's server."""
        return df.localCheckpoint()

    def store(self, df: DataFrame, path: str) -> DataFrame:
        """Computed once, kept on the server for the summary's queries (released when this process drops it) and
        brought here to be written: sending the rows back in a plan cost the group proof 7 s of its 17 at 1,000
        groups, measured."""
        kept = df.localCheckpoint()
        self._write(kept.toArrow(), path)
        return kept

    def store_rows(self, spark: SparkSession, rows: list[dict[str, Any]], schema: StructType, path: str) -> None:
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        self._write(pa.Table.from_pylist(rows, schema=to_arrow_schema(schema)), path)

    @staticmethod
    def _write(table: Any, path: str) -> None:
        import shutil

        import pyarrow.parquet as pq
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
        pq.write_table(table, os.path.join(path, "part-00000.parquet"))


FILES = Files()


def read_snapshot(spark: SparkSession, path: str, schema: StructType, what: str, io: Files = FILES) -> DataFrame:
    """Read a snapshot and conform it to `schema`: required columns must exist, nullable ones may be absent.

    Types are cast (an int32 offset column is fine); extra columns are ignored. A snapshot is small
    next to Kafka data, so the explicit checks are worth their cost.
    """
    try:
        df = io.frame(spark, path)
    except InputError:
        raise
    except Exception as exc:  # AnalysisException: path missing / not Parquet
        raise InputError(f"cannot read the {what} snapshot {path}: {str(exc).splitlines()[0]}") from exc
    present = set(io.columns(df, path))
    require_columns(present, schema, what, path)
    cols = [(F.col(f.name) if f.name in present else F.lit(None)).cast(f.dataType).alias(f.name)
            for f in schema.fields]
    return df.select(*cols)


def require_columns(present: Iterable[str], schema: StructType, what: str, path: str) -> None:
    missing = [f.name for f in schema.fields if not f.nullable and f.name not in set(present)]
    if missing:
        raise InputError(f"the {what} snapshot {path} lacks column(s) {', '.join(missing)}; "
                         f"expected {schema.simpleString()}")


def validate(df: DataFrame, key: Sequence[str], required: Sequence[str], what: str) -> None:
    """Reject null required values and duplicate keys (duplicates would multiply rows in the joins and
    hide or invent differences), in one pass over the snapshot."""
    null_any = F.max(F.when(F.greatest(*[F.col(c).isNull() for c in required]), 1).otherwise(0))
    bad = (df.groupBy(*key).agg(F.count(F.lit(1)).alias("rows"), null_any.alias("nulls"))
           .filter("rows > 1 OR nulls > 0 OR " + " OR ".join(f"`{k}` IS NULL" for k in key)).limit(5).collect())
    if bad:
        shown = "; ".join(", ".join(f"{k}={r[k]}" for k in key)
                          + (f" ({r['rows']} rows)" if r["rows"] > 1 else " (null in a required column)") for r in bad)
        raise InputError(f"the {what} snapshot has duplicate rows or nulls in required columns "
                         f"({', '.join(required)}): {shown}")


def check_rows(rows: list[dict[str, Any]], key: Sequence[str], required: Sequence[str], what: str) -> None:
    """`validate` for rows the driver holds: no null required value, no key twice."""
    seen: dict[tuple, int] = {}
    for r in rows:
        k = tuple(r.get(c) for c in key)
        seen[k] = seen.get(k, 0) + 1
    bad = [(k, n) for k, n in seen.items() if n > 1 or None in k]
    bad += [(tuple(r.get(c) for c in key), 0) for r in rows if any(r.get(c) is None for c in required)]
    if bad:
        shown = "; ".join(", ".join(f"{c}={v}" for c, v in zip(key, k))
                          + (f" ({n} rows)" if n > 1 else " (null in a required column)") for k, n in bad[:5])
        raise InputError(f"the {what} snapshot has duplicate rows or nulls in required columns "
                         f"({', '.join(required)}): {shown}")


def base_parser(prog: str, doc: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", required=True, help="directory for the Parquet results (overwritten)")
    parser.add_argument("--summary", required=True, help="path of the JSON summary (written on pass, fail and error)")
    parser.add_argument("--max-listed", type=int, default=DEFAULT_LISTED,
                        help=f"failing rows copied into the summary and stderr (default {DEFAULT_LISTED})")
    parser.add_argument("--app-name", default=None, help="Spark application name")
    return parser


def session(app_name: str) -> SparkSession:
    spark = SparkSession.builder.appName(app_name).getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("MIRRORBOOK_SPARK_LOG_LEVEL", "WARN"))
    return spark


def rows_as_dicts(rows: Iterable[Any]) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in rows]


def collect_dicts(df: DataFrame) -> list[dict[str, Any]]:
    """A result's rows as dicts, nested structs as dicts, through Arrow: what `rows_as_dicts(df.collect())` gives,
    without a Row object per struct (the record proof's 149,100 boundaries at 1,000 groups: 4.5 s in asDict alone,
    measured)."""
    return df.toArrow().to_pylist()


def sort_key(row: dict[str, Any], *cols: str) -> tuple:
    """Sort rows the driver holds by `cols` as Spark sorts them ascending: nulls first."""
    return tuple((row[c] is not None, row[c]) for c in cols)


def collect_many(frames: dict[str, DataFrame]) -> dict[str, list[dict[str, Any]]]:
    """Several small results in one query (one round trip to a Spark Connect server): each row as JSON,
    tagged with its result's name. Rows of a result come back in no particular order."""
    union = None
    for name, df in frames.items():
        tagged = df.select(F.lit(name).alias("result"),  # struct("*"): no schema round trip
                           F.to_json(F.struct(F.col("*")), {"ignoreNullFields": "false"}).alias("row"))
        union = tagged if union is None else union.unionByName(tagged)
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in frames}
    for r in union.collect() if union is not None else []:
        out[r["result"]].append(json.loads(r["row"]))
    return out


def is_uri(path: str) -> bool:
    """`s3a://…`, `hdfs://…`, `file:///…`: a location the cluster reaches through Hadoop's FileSystem."""
    return re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", path) is not None


def write_summary(path: str, summary: dict[str, Any], spark: SparkSession | None = None) -> None:
    """Write so a reader never sees half a summary: a local file atomically (tmp + rename); a URI through
    Spark's writer as a one-file text dataset, whose _SUCCESS marker the committer writes last."""
    text = json.dumps(summary, indent=2, sort_keys=True, default=str)
    if is_uri(path):
        if spark is None:
            raise InputError(f"no Spark session to write the summary to {path}")
        spark.createDataFrame([(text,)], "value string").coalesce(1).write.mode("overwrite").text(path)
        return
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def shipped_file(path: str) -> str:
    """A file given on the command line: where it is, or — shipped with the job by spark-submit --files
    to a cluster's driver — where Spark put it (SparkFiles)."""
    if os.path.isfile(path):
        return path
    from pyspark import SparkFiles
    try:
        shipped = SparkFiles.get(os.path.basename(path))
    except Exception:  # noqa: BLE001 — no SparkContext here (a Spark Connect client): not shipped
        return path
    return shipped if os.path.isfile(shipped) else path


def report_failures(app: str, failures: list[dict[str, Any]], total: int) -> None:
    """Name every listed failing row on stderr, one line each (what a log reader greps for)."""
    for f in failures:
        print(f"PARITY-FAIL {app} {f['label']}: {f['reason']}", file=sys.stderr)
    if total > len(failures):
        print(f"PARITY-FAIL {app}: ... and {total - len(failures)} more (see the Parquet output)", file=sys.stderr)


def run_app(app: str, args: argparse.Namespace, body: Callable[[SparkSession], dict[str, Any]],
            spark: SparkSession | None = None) -> int:
    """Run `body`, which returns the summary's content (with `passed`, `failures`, `failures_total`).

    Always writes the summary; turns every outcome into one of the three exit codes. Given a session (a
    Spark Connect client's), the job runs in it and leaves it open for the next; else it makes its own.
    """
    started = time.monotonic()  # an elapsed time: the wall clock may be set meanwhile
    summary: dict[str, Any] = {"app": app, "summary_version": SUMMARY_VERSION, "output": args.output}
    own = spark is None
    try:
        if spark is None:
            spark = session(args.app_name or f"mirrorbook-{app}")
            summary["master"] = spark.sparkContext.master
        else:
            summary["master"] = "spark-connect"
        summary["spark_version"] = spark.version
        summary.update(body(spark))
        summary["status"] = "passed" if summary["passed"] else "failed"
        code = EXIT_PASSED if summary["passed"] else EXIT_FAILED
        if not summary["passed"]:
            report_failures(app, summary["failures"], summary["failures_total"])
    except InputError as exc:
        summary.update(status="error", passed=False, error=str(exc), failures=[], failures_total=0)
        print(f"PARITY-ERROR {app}: {exc}", file=sys.stderr)
        code = EXIT_ERROR
    except Exception as exc:  # a Spark or Kafka error: the check did not run, which is not a pass
        traceback.print_exc()
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        summary.update(status="error", passed=False, error=f"{type(exc).__name__}: {first}", failures=[],
                       failures_total=0)
        print(f"PARITY-ERROR {app}: {summary['error']}", file=sys.stderr)
        code = EXIT_ERROR
    summary["elapsed_s"] = round(time.monotonic() - started, 3)
    try:
        write_summary(args.summary, summary, spark)
    except Exception as exc:  # the verdict must not vanish: it still goes to stderr, and the exit code says it
        print(f"PARITY-ERROR {app}: cannot write the summary to {args.summary}: {exc}\n"
              f"{json.dumps(summary, default=str)}", file=sys.stderr)
        code = EXIT_ERROR
    print(f"PARITY-{summary['status'].upper()} {app}: summary {args.summary}", file=sys.stderr)
    if own and spark is not None:
        spark.stop()
    return code


def tp_label(topic: Any, partition: Any) -> str:
    return f"{topic}-{partition}"

