"""Benchmark: one-pass translation of all groups vs Kafka's per-group re-read of the checkpoints topic.

Builds a `<alias>.checkpoints.internal` topic of synthetic, correctly encoded Checkpoint records
(default 200,000 records for 1,000 groups) on a devstack it starts in its own run dir — or on any
cluster given with --bootstrap — then measures:
  * one pass: `translate_offsets_all` (read to the end once, decode, last checkpoint per partition
    of every group) — records/s end to end;
  * Kafka's way: `translate_offsets` per group (one full read per group). Reading the topic 1,000
    times takes long, so a sample of groups is timed and the mean extrapolated to all groups; the
    output says so. Sampled results are checked equal to the one-pass results.

Run on demand:  .venv/bin/python benchmarks/translate.py [--bootstrap HOST:PORT] [--records N] [--groups N]
The last two lines are `RESULT translate_records_per_s=…` and `RESULT translate_speedup_vs_per_group=…`.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer

from mirrorbook.devstack.config import StackSettings
from mirrorbook.devstack.stack import DevStack
from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.reader import read_ranges
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.internal_topics import read_checkpoints, scan_checkpoints
from mirrorbook.mm2.records import Checkpoint
from mirrorbook.mm2.remote_cluster_utils import translate_offsets, translate_offsets_all


def build_topic(bootstrap: str, alias: str, records: int, groups: int, partitions_per_group: int) -> str:
    """Produce `records` checkpoints cycling over groups × partitions, offsets growing each round."""
    topic = f"{alias}.checkpoints.internal"
    KafkaAdmin(bootstrap).create_topics({topic: 1})
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.num.messages": 10000,
                         "queue.buffering.max.messages": 500000, "compression.type": "lz4"})
    keys = [(f"bench-group-{g:04d}", f"A.bench-topic-{p % 5}", p // 5)
            for g in range(groups) for p in range(partitions_per_group)]
    for i in range(records):
        group, topic_name, partition = keys[i % len(keys)]
        round_ = i // len(keys)
        cp = Checkpoint(group, topic_name, partition, 1000 * round_ + 7, 1000 * round_ + 3, "")
        while True:
            try:
                producer.produce(topic, key=cp.key_bytes(), value=cp.value_bytes())
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise SystemExit("could not deliver all benchmark records")
    return topic


def measure_one_pass(bootstrap: str, alias: str, repeat: int) -> tuple[float, int, dict]:
    times, result, records = [], {}, 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        log = read_checkpoints(bootstrap, alias)
        result = log.offsets()
        times.append(time.perf_counter() - t0)
        records = log.records
    # The same through the public API, to be sure nothing differs.
    assert translate_offsets_all(bootstrap, alias, ".*") == result
    return statistics.median(times), records, result


def measure_decode_only(bootstrap: str, topic: str, records: int) -> float:
    """Decoding alone, on records already fetched: what the Python side costs without the network."""
    msgs = list(read_ranges(bootstrap, {TP(topic, 0): (0, records)}))
    t0 = time.perf_counter()
    scan_checkpoints(iter(msgs), topic)
    return len(msgs) / (time.perf_counter() - t0)


def measure_per_group(bootstrap: str, alias: str, groups: list[str], expected: dict) -> float:
    times = []
    for g in groups:
        t0 = time.perf_counter()
        got = translate_offsets(bootstrap, alias, g)
        times.append(time.perf_counter() - t0)
        assert got == expected.get(g, {}), f"per-group result differs for {g}"
    return statistics.mean(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", help="use this cluster instead of starting a devstack")
    ap.add_argument("--run-dir", help="devstack run dir (default: a fresh temporary one, purged at the end)")
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--groups", type=int, default=1_000)
    ap.add_argument("--partitions-per-group", type=int, default=10)
    ap.add_argument("--sample-groups", type=int, default=10, help="groups timed Kafka's way (extrapolated)")
    ap.add_argument("--repeat", type=int, default=3, help="one-pass runs (median reported)")
    args = ap.parse_args(argv)

    stack = None
    bootstrap = args.bootstrap
    if not bootstrap:
        run_dir = Path(args.run_dir or tempfile.mkdtemp(prefix="mb-bench-translate-"))
        stack = DevStack(run_dir)
        t0 = time.perf_counter()
        stack.up(StackSettings())
        bootstrap = stack.require().brokers["B"].bootstrap
        print(f"devstack up in {time.perf_counter() - t0:.1f}s ({run_dir}); benchmarking on cluster B {bootstrap}")
    try:
        alias = f"BENCH{uuid.uuid4().hex[:6]}"
        t0 = time.perf_counter()
        topic = build_topic(bootstrap, alias, args.records, args.groups, args.partitions_per_group)
        print(f"built {topic}: {args.records} checkpoint records, {args.groups} groups x "
              f"{args.partitions_per_group} partitions in {time.perf_counter() - t0:.1f}s")
        print(f"cpus: {os.cpu_count()}, python {sys.version.split()[0]}")

        one_pass_s, records, result = measure_one_pass(bootstrap, alias, args.repeat)
        rate = records / one_pass_s
        print(f"one pass: {records} records, {len(result)} groups, "
              f"{sum(len(v) for v in result.values())} partitions translated in {one_pass_s:.3f}s "
              f"(median of {args.repeat}) = {rate:,.0f} records/s")

        print(f"  of which decoding alone (records already fetched): "
              f"{measure_decode_only(bootstrap, topic, records):,.0f} records/s; each read also waits ~0.5 s "
              "for its last consume() batch (mirrorbook.kafka.reader)")

        sample = random.Random(7).sample(sorted(result), min(args.sample_groups, len(result)))
        per_group_s = measure_per_group(bootstrap, alias, sample, result)
        baseline_s = per_group_s * args.groups
        speedup = baseline_s / one_pass_s
        print(f"per group (Kafka's way): {per_group_s:.3f}s per group, measured on {len(sample)} sampled groups "
              f"(results equal to one pass); extrapolated to {args.groups} groups: {baseline_s:.1f}s")
        print(f"RESULT translate_records_per_s={rate:.0f} records/s")
        print(f"RESULT translate_speedup_vs_per_group={speedup:.0f}x")
    finally:
        if stack is not None and not args.run_dir:
            stack.down(purge=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
