"""The record proof of one scene three ways, side by side in one run: on a warm Spark Connect server, by a
cold spark-submit, and the same comparison in one Python process (the reference).

Scene: 3 topics x 6 partitions x --records-per-partition (default 6000: 108k records) on cluster A,
mirrored by MM2 to B. Each way reads every record of the 18 partition pairs on both sides, hashes it
(sha256 of key | value | headers | timestamp, as spark_apps/record_parity.py does) and pairs the records
of each pair by (hash, occurrence), in offset order; a clean mirror must match every record.

Each proof figure is measured for every reader of --readers (the app's --reader: `batched`, a few tasks each
reading many partitions with one librdkafka consumer; `kafka-source`, Spark's Kafka source, a task and a consumer
per partition), in the same run on the same scene, and named by it (READER: batched, kafka_source).

Figures (wall time of the proof alone, the scene already loaded; Connect after one warm-up run per reader, as a
server that already answered the runbook's warm-up query has paid its first-query costs):
  RESULT record_proof_READER_s=...                the proof on the warm Spark Connect server
  RESULT record_proof_submit_READER_s=...         the same job by spark-submit (a JVM per job)
  RESULT single_process_s=...                     the reference: confluent-kafka + hashlib, one process
  RESULT record_proof_READER_vs_single_process=...x  Connect / reference
  RESULT record_proof_mid_batch_READER_s=...      the proof on Connect with every range starting inside a
                                                  record batch (as a runbook's anchored ranges do)
  RESULT record_proof_mid_batch_broker_wait_READER_s=...  the same with Kafka's default fetch.max.wait.ms (500),
                                                  which the app no longer uses: what that wait cost
  RESULT record_proof_s=...                       the first reader's figure, under its old name

With --workers N,M (e.g. 1,2), the same scene's proof on the Connect server again, the server now running on a
Spark standalone cluster of the stack's own (`devstack up --spark-workers N`: a master, N workers, an executor on
each, all separate JVMs), after the figures above (local[*]), one cluster size after another:
  RESULT record_proof_workers_N_READER_s=...      the proof on the server over an N-worker cluster
  RESULT record_proof_workers_N_READER_vs_local=...x  that, over the same proof on local[*]
On this benchmark's 2-core machine every worker shares the same two cores: the figures show what the cluster's
own costs are (executors in other JVMs, their results sent over the network), not what more machines would buy.

Run: .venv/bin/python benchmarks/record_proof.py [--records-per-partition 6000] [--repeat 3]
     [--readers batched,kafka-source] [--workers 1,2]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

from bench_stack import throwaway_stack

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.helpers: how the tests wait for a topic to be mirrored


def _digest(m) -> bytes:
    """The content hash record_parity computes, over the same fields, in the same order: key and value raw
    behind their length, the headers as JSON with base64 values, the timestamp in ms."""
    h = hashlib.sha256()
    for part in (m.key(), m.value()):
        h.update(b"-:" if part is None else str(len(part)).encode() + b":" + part)
        h.update(b"|")
    headers = m.headers()
    h.update(b"-" if headers is None else json.dumps(
        [{"key": k, "value": None if v is None else base64.b64encode(v).decode()} for k, v in headers],
        separators=(",", ":")).encode())
    h.update(b"|" + str(m.timestamp()[1]).encode())
    return h.digest()


def single_process(a: str, b: str, pairs: list[tuple[str, str, int]], ends: dict) -> tuple[float, int, int]:
    """Read both sides, hash, pair by (hash, occurrence) in offset order: (seconds, matched, unmatched)."""
    from mirrorbook.kafka.reader import read_ranges
    from mirrorbook.kafka.types import TP

    t0 = time.monotonic()
    side: dict[str, dict[TP, list[bytes]]] = {"a": {}, "b": {}}
    for name, bootstrap, tps in (("a", a, {TP(s, p): (0, ends[TP(s, p)]) for s, _, p in pairs}),
                                 ("b", b, {TP(t, p): (0, ends[TP(t, p)]) for _, t, p in pairs})):
        for m in read_ranges(bootstrap, tps, timeout_s=300):
            side[name].setdefault(TP(m.topic(), m.partition()), []).append(_digest(m))
    matched = unmatched = 0
    for s, t, p in pairs:
        src, dst = side["a"].get(TP(s, p), []), side["b"].get(TP(t, p), [])
        seen: Counter[bytes] = Counter()
        at_src = {}
        for i, h in enumerate(src):
            at_src[(h, seen[h])] = i
            seen[h] += 1
        seen.clear()
        last = -1
        for h in dst:
            i = at_src.pop((h, seen[h]), None)
            seen[h] += 1
            if i is None or i < last:  # extra on the target, or out of order
                unmatched += 1
            else:
                matched += 1
                last = i
        unmatched += len(at_src)
    return time.monotonic() - t0, matched, unmatched


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records-per-partition", type=int, default=6000)
    ap.add_argument("--repeat", type=int, default=3, help="timed runs of each way (the median is reported)")
    ap.add_argument("--readers", default="batched,kafka-source",
                    help="the app's readers to measure side by side, comma-separated (default: both)")
    ap.add_argument("--workers", default="",
                    help="Spark standalone cluster sizes to measure the Connect proof on as well, e.g. 1,2 (at most 4)")
    args = ap.parse_args()
    readers = [r.strip() for r in args.readers.split(",") if r.strip()]
    workers = [int(n) for n in args.workers.split(",") if n.strip()]

    from tests.helpers import wait_mirrored

    from mirrorbook.devstack.workload import load
    from mirrorbook.kafka.admin import KafkaAdmin
    from mirrorbook.kafka.types import TP
    from mirrorbook.parity import RecordRange, connect, submit, write_record_snapshot

    with throwaway_stack("mb-proof-") as (work, stack):
        stack.up(overrides={"spark": True})
        state = stack.require()
        a, b, url = state.brokers["A"].bootstrap, state.brokers["B"].bootstrap, state.spark.url
        topics = [f"proof-{i}" for i in range(3)]
        t0 = time.monotonic()
        report = load(a, topics, 6, args.records_per_partition, [])
        admin_a, admin_b = KafkaAdmin(a), KafkaAdmin(b)
        for t in topics:
            wait_mirrored(admin_a, admin_b, t, f"A.{t}", timeout=600)
        print(f"loaded and mirrored {report.produced} records in {time.monotonic() - t0:.1f}s")
        pairs = [(t, f"A.{t}", p) for t in topics for p in range(6)]
        ends = {**admin_a.high_watermarks([TP(s, p) for s, _, p in pairs]),
                **admin_b.high_watermarks([TP(t, p) for _, t, p in pairs])}
        ranges = [RecordRange(source_topic=s, source_partition=p, target_topic=t, target_partition=p,
                              source_start=0, source_end=ends[TP(s, p)], target_start=0, target_end=ends[TP(t, p)])
                  for s, t, p in pairs]
        snap = write_record_snapshot(work / "snapshot", ranges)

        # Ranges starting one record into each partition: inside the producer's first batch, as the runbook's
        # anchored ranges (from the lowest exact group position) nearly always start.
        mid = write_record_snapshot(work / "mid-batch", [r.model_copy(update={"source_start": 1, "target_start": 1})
                                                         for r in ranges])
        kafka_default = {"fetch.max.wait.ms": "500"}

        def job(n: int, reader: str, snapshot=snap, **options) -> submit.SparkSubmitSpec:
            return submit.record_parity_job(a, b, work / f"out-{reader}-{n}", snapshot=snapshot,
                                            source_options=options, target_options=options, reader=reader)

        def timed(fn) -> tuple[float, object]:
            t = time.monotonic()
            out = fn()
            return time.monotonic() - t, out

        def passed(summary) -> None:
            assert summary.passed, summary.failure_message()
            assert summary.totals["matched"] == report.produced, summary.totals

        for reader in readers:
            warm, first = timed(lambda: connect.run(job(0, reader), url))
            print(f"{reader}: Connect, first run (warm-up): {warm:.2f}s, {first.status}")
        ways = ("connect", "submit", "mid", "mid_wait")
        runs: dict[str, list[float]] = {"single": [], **{f"{w}:{r}": [] for w in ways for r in readers}}
        for i in range(args.repeat):
            for reader in readers:
                for way, run in (("connect", lambda: connect.run(job(1 + i, reader), url)),
                                 ("submit", lambda: submit.run(job(100 + i, reader), timeout_s=900)),
                                 ("mid", lambda: connect.run(job(200 + i, reader, mid), url)),
                                 ("mid_wait", lambda: connect.run(job(300 + i, reader, mid, **kafka_default), url))):
                    s, summary = timed(run)
                    if way in ("connect", "submit"):
                        passed(summary)
                    else:
                        assert summary.passed, summary.failure_message()
                    runs[f"{way}:{reader}"].append(s)
                print(f"run {i + 1} {reader}: connect {runs[f'connect:{reader}'][-1]:.2f}s, "
                      f"spark-submit {runs[f'submit:{reader}'][-1]:.2f}s, mid-batch {runs[f'mid:{reader}'][-1]:.2f}s "
                      f"(with the broker's 500 ms wait {runs[f'mid_wait:{reader}'][-1]:.2f}s)")
            s, matched, unmatched = single_process(a, b, pairs, ends)
            assert unmatched == 0 and matched == report.produced, (matched, unmatched)
            runs["single"].append(s)
            print(f"run {i + 1}: single process {s:.2f}s")
        for n in workers:
            # The server's cluster is sized at `up` only (a running one is refused a new size): down, keeping
            # Kafka's data and the scene, and up on the new cluster.
            connect.close()
            t = time.monotonic()
            stack.down()
            stack.up(overrides={"spark": True, "spark_workers": n})
            url = stack.require().spark.url
            print(f"the stack again, the server on a standalone cluster of {n} worker(s): {time.monotonic() - t:.1f}s")
            for reader in readers:
                warm, first = timed(lambda: connect.run(job(400 + n, reader), url))
                print(f"{reader}: Connect on {n} worker(s), first run (warm-up): {warm:.2f}s, {first.status}")
                key = f"workers_{n}:{reader}"
                runs[key] = []
                for i in range(args.repeat):
                    s, summary = timed(lambda: connect.run(job(500 + 10 * n + i, reader), url))
                    passed(summary)
                    runs[key].append(s)
                    print(f"run {i + 1} {reader}: connect on {n} worker(s) {s:.2f}s")
        connect.close()
        med = {k: statistics.median(v) for k, v in runs.items()}
        print(f"(median of {args.repeat}; {report.produced} records per side, {len(pairs)} partition pairs)")
        for reader in readers:
            name = reader.replace("-", "_")
            print(f"RESULT record_proof_{name}_s={med[f'connect:{reader}']:.2f} s")
            print(f"RESULT record_proof_submit_{name}_s={med[f'submit:{reader}']:.2f} s")
            print(f"RESULT record_proof_{name}_vs_single_process={med[f'connect:{reader}'] / med['single']:.2f}x")
            print(f"RESULT record_proof_mid_batch_{name}_s={med[f'mid:{reader}']:.2f} s")
            print(f"RESULT record_proof_mid_batch_broker_wait_{name}_s={med[f'mid_wait:{reader}']:.2f} s")
            for n in workers:
                print(f"RESULT record_proof_workers_{n}_{name}_s={med[f'workers_{n}:{reader}']:.2f} s")
                print(f"RESULT record_proof_workers_{n}_{name}_vs_local="
                      f"{med[f'workers_{n}:{reader}'] / med[f'connect:{reader}']:.2f}x")
        print(f"RESULT single_process_s={med['single']:.2f} s")
        print(f"RESULT record_proof_s={med[f'connect:{readers[0]}']:.2f} s")
        return 0


if __name__ == "__main__":
    sys.exit(main())
