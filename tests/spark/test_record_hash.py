"""The batched reader hashes records in Python; the Kafka source's records are hashed in Spark SQL (`content_hash`).
A record must get the same `hash`, `h64` and `key_preview` either way, or the two readers' proofs would differ:
both computed here, on a local Spark, for records that stress the canonical text (null vs empty key and value,
headers none / several / repeated names / null values / names JSON must escape, bytes that are not UTF-8,
timestamps before 1970 and far ahead). No Kafka: the rows are built as the Kafka source gives them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mirrorbook.parity import connect, submit

pytestmark = pytest.mark.spark
app = connect.load_app(submit.apps_dir() / "record_parity.py")

KAFKA_ROW = ("key binary, value binary, headers array<struct<key:string,value:binary>>, ts long, topic string, "
             "partition int, offset long")
Record = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]] | None, int]

TRICKY: list[Record] = [
    (None, None, None, 0),
    (b"", b"", None, 1),
    (None, b"", [], 2),  # an empty header list (the Kafka source gives null for none: both rendered)
    (b"k", None, [("a", b"1"), ("b", b"")], 1_700_000_000_123),
    (b"k", b"v", [("dup", b"x"), ("dup", b"y"), ("dup", None)], -1),
    (b"\xff\xfe\x00\x80", b"\xc3\x28 not utf-8 \xe2\x82", [("h", b"\xff\x00")], -86_400_000_123),
    ("ключ-é-😀".encode(), "значение".encode(), [("naïve 😀", "ü".encode())], 253_402_300_799_999),
    (b"q", b"v", [('quote" back\\ slash/', None), ("ctl\b\t\n\f\r\x01\x1f\x7f", b"z"), ("\u2028", b"")], 5),
    (b"x" * 200, b"y" * 1000, [("", b"")], 7),
    ("é".encode() * 100, None, None, 8),  # a preview cut inside multi-byte characters' bytes: 80 characters
]


def _both(spark: Any, records: list[Record]) -> tuple[list[tuple], list[tuple]]:
    """(hash, h64, key_preview) per record from Spark SQL's `content_hash`, and from the Python hash of the
    batched reader through the same `identified` (the columns mapInArrow yields, as Arrow would carry them)."""
    from pyspark.sql import functions as F

    rows = [(k, v, h, ts, "t", 0, i) for i, (k, v, h, ts) in enumerate(records)]
    df = spark.createDataFrame(rows, KAFKA_ROW).withColumn("timestamp", F.timestamp_millis("ts"))
    sql = [(r["hash"], r["h64"], r["key_preview"]) for r in app.content_hash(df).orderBy("offset").collect()]
    hashed = [("t", 0, i, app.content_digest(k, v, h, ts), k) for i, (k, v, h, ts) in enumerate(records)]
    py = [(r["hash"], r["h64"], r["key_preview"])
          for r in app.identified(spark.createDataFrame(hashed, app.READ_SCHEMA)).orderBy("offset").collect()]
    return sql, py


def test_python_and_spark_sql_hash_tricky_records_alike(spark: Any):
    sql, py = _both(spark, TRICKY)
    assert py == sql
    assert len({h for h, _, _ in sql}) == len(TRICKY)  # null, empty and absent are all told apart
    assert sql[0][2] is None and sql[1][2] == "" and len(sql[-1][2]) == 80


def test_the_canonical_text_is_the_documented_one():
    text = app.canonical_text(b"k", None, [("a", b"\x00\x01"), ("n", None)], 12)
    assert text == b'1:k|-:|[{"key":"a","value":"AAE="},{"key":"n"}]|12'
    assert app.canonical_text(None, b"", None, -5) == b"-:|0:|-|-5"


_bytes = st.none() | st.binary(max_size=40)
_headers = st.none() | st.lists(st.tuples(st.text(st.characters(exclude_categories=["Cs"]), max_size=12),
                                          st.none() | st.binary(max_size=12)), max_size=4)
_record = st.tuples(_bytes, _bytes, _headers, st.integers(min_value=-(2 ** 43), max_value=2 ** 43))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_record, min_size=1, max_size=40))
def test_python_and_spark_sql_hash_any_record_alike(spark: Any, records: list[Record]):
    sql, py = _both(spark, records)
    assert py == sql


def test_the_batched_reader_runs_only_where_the_executors_can_import_it(spark: Any):
    """Where a module of the batched reader is missing the proof falls back to the Kafka source (the summary says
    so). Locally the driver and the executors share one Python: the missing module is found missing by either."""
    assert app.executors_can_read(spark)
    assert not app.executors_can_read(spark, ("confluent_kafka", "no_such_module_of_mirrorbook"))
