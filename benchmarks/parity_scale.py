"""How group-offset parity scales: spark_apps/group_parity.py on 1M and 10M synthetic rows (local[2]),
against the same classification in one process with pyarrow (mirrorbook.parity.local) on the same files.

Run on demand (not a test):  .venv/bin/python benchmarks/parity_scale.py [--sizes 1000000,10000000]

Prints, besides details:
  RESULT parity_rows_per_s=...                  rows / wall time of the largest spark-submit (JVM start included)
  RESULT parity_10m_over_1m=...                 wall time ratio largest / smallest size (<= 12 is linear for 10x)
  RESULT parity_spark_over_single_process=...   spark-submit wall / pyarrow wall at the largest size (>1: Spark slower)
Every timing covers reading the Parquet snapshot, classifying and writing the Parquet result.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "include"))

from mirrorbook.parity import collector, schemas, submit  # noqa: E402
from mirrorbook.parity.local import classify_groups  # noqa: E402

GROUPS, TOPICS = 10_000, 100
# Share of rows per fault; the rest are committed exactly at the reference offset.
REREAD, SKIP, MISSING, UNEXPECTED = 0.02, 0.0005, 0.0005, 0.0005


def _names(prefix: str, idx: np.ndarray, count: int) -> pa.Array:
    """Dictionary-decoded strings: building 10M Python strings would dominate the set-up time."""
    dictionary = pa.array([f"{prefix}-{i}" for i in range(count)])
    return pc.take(dictionary, pa.array(idx))


def synthesize(rows: int, out: Path, seed: int = 7) -> collector.GroupSnapshot:
    """Unique (group, topic, partition) keys; faults at the rates above; watermarks for every partition."""
    rng = np.random.default_rng(seed)
    i = np.arange(rows, dtype=np.int64)
    group, topic, partition = i % GROUPS, (i // GROUPS) % TOPICS, (i // (GROUPS * TOPICS)).astype(np.int32)
    expected_off = rng.integers(0, 1_000_000, rows)
    known = rng.random(rows) < 0.5
    true_off = np.where(known, expected_off + rng.integers(0, 100, rows), 0)
    reference = np.where(known, true_off, expected_off)
    fate = rng.random(rows)
    delta = rng.integers(1, 50, rows)
    committed = np.where(fate < REREAD, np.maximum(reference - delta, 0),
                         np.where(fate < REREAD + SKIP, reference + delta, reference))
    keep = fate >= REREAD + SKIP + MISSING  # rows in the MISSING band get no committed offset
    keep |= fate < REREAD + SKIP
    cluster = pa.array(["B"] * rows).dictionary_encode().dictionary_decode()
    groups_a, topics_a = _names("group", group, GROUPS), _names("topic", topic, TOPICS)
    expected = pa.table({
        "cluster": cluster, "group": groups_a, "topic": topics_a, "partition": partition,
        "expected_offset": expected_off, "true_offset": pa.array(true_off, mask=~known),
        "source_cluster": pa.nulls(rows, pa.string()), "source_topic": pa.nulls(rows, pa.string()),
        "source_partition": pa.nulls(rows, pa.int32()), "source_committed": pa.nulls(rows, pa.int64()),
    }, schema=schemas.EXPECTED)
    mask = pa.array(keep)
    actual = pa.table({"cluster": cluster.filter(mask), "group": groups_a.filter(mask), "topic": topics_a.filter(mask),
                       "partition": pa.array(partition).filter(mask),
                       "committed_offset": pa.array(committed).filter(mask)},
                      schema=schemas.ACTUAL)
    n_unexp = int(rows * UNEXPECTED)  # committed partitions of in-scope groups that nothing expects
    j = rng.integers(0, rows, n_unexp)
    unexpected = pa.table({"cluster": cluster.slice(0, n_unexp), "group": _names("group", group[j], GROUPS),
                           "topic": _names("topic", topic[j], TOPICS),
                           "partition": pa.array(1_000 + np.arange(n_unexp, dtype=np.int32)),
                           "committed_offset": pa.array(committed[j])}, schema=schemas.ACTUAL)
    tps = [(t, p) for t in range(TOPICS) for p in range(int(partition.max()) + 1)]
    marks = pa.table({"cluster": ["B"] * len(tps), "topic": [f"topic-{t}" for t, _ in tps],
                      "partition": pa.array([p for _, p in tps], pa.int32()), "low": [0] * len(tps),
                      "high": [2_000_000] * len(tps)}, schema=schemas.WATERMARKS)
    return collector.GroupSnapshot(expected=collector.write(expected, out / "expected.parquet"),
                                   actual=collector.write(pa.concat_tables([actual, unexpected]),
                                                          out / "actual.parquet"),
                                   watermarks=collector.write(marks, out / "watermarks.parquet"))


def run_spark(snap: collector.GroupSnapshot, out: Path, master: str, driver_memory: str,
              jvm_options: str | None) -> tuple[float, submit.ParitySummary]:
    spec = submit.group_parity_job(snap, out, master=master, driver_memory=driver_memory, jvm_options=jvm_options)
    started = time.perf_counter()
    summary = submit.run(spec, timeout_s=3600)
    wall = time.perf_counter() - started
    if summary.status == "error":
        raise SystemExit(f"spark job could not run: {summary.error} (log {summary.log})")
    return wall, summary


def run_single(snap: collector.GroupSnapshot, out: Path) -> tuple[float, dict[str, int]]:
    started = time.perf_counter()
    result = classify_groups(pq.read_table(snap.expected), pq.read_table(snap.actual), pq.read_table(snap.watermarks))
    pq.write_table(result, out)
    wall = time.perf_counter() - started
    counts = result.group_by("status").aggregate([("status", "count")]).to_pylist()
    return wall, {c["status"]: c["status_count"] for c in counts}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000000,10000000")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--jvm-options", default=None,
                        help=f"driver JVM flags (default: {submit.QUICK_START_JVM!r} up to "
                             f"{submit.QUICK_START_MAX_ROWS} input rows on a local master, else the JVM defaults)")
    parser.add_argument("--workdir", default=None, help="keep the data here (default: a temp dir, removed)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    work = Path(args.workdir or tempfile.mkdtemp(prefix="parity-scale-"))
    walls: dict[int, float] = {}
    singles: dict[int, float] = {}
    try:
        for n in sizes:
            t0 = time.perf_counter()
            snap = synthesize(n, work / f"snap-{n}")
            print(f"rows={n}: synthesized in {time.perf_counter() - t0:.1f}s "
                  f"({snap.expected.stat().st_size / 1e6:.0f} MB expected, "
                  f"{snap.actual.stat().st_size / 1e6:.0f} MB actual)")
            walls[n], summary = run_spark(snap, work / f"spark-{n}", args.master, args.driver_memory,
                                             args.jvm_options)
            singles[n], counts = run_single(snap, work / f"single-{n}.parquet")
            spark_counts = {k: v for k, v in summary.counts.items() if v}
            assert spark_counts == counts, (spark_counts, counts)  # both classify the same
            print(f"rows={n}: spark-submit {walls[n]:.1f}s wall ({summary.elapsed_s:.1f}s inside the app), "
                  f"pyarrow {singles[n]:.1f}s; counts {counts}")
        big, small = max(sizes), min(sizes)
        print(f"RESULT parity_rows_per_s={big / walls[big]:.0f}")
        print(f"RESULT parity_10m_over_1m={walls[big] / walls[small]:.2f}")
        print(f"RESULT parity_spark_over_single_process={walls[big] / singles[big]:.2f}")
        print(f"RESULT parity_single_process_rows_per_s={big / singles[big]:.0f}")
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
