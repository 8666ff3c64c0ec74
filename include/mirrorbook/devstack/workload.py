"""The workload tool: topics, keyed sequence-numbered records, and consumer groups parked at chosen offsets.

Records on partition p of topic t carry `seq` = their offset on the cluster they were produced to
(seq continues from the partition's high watermark), so any consumer can prove it skipped or
re-read nothing by comparing sequence numbers.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, Mapping

from confluent_kafka import Producer
from pydantic import BaseModel

from mirrorbook.errors import MirrorbookError
from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.config import client_config
from mirrorbook.kafka.types import TP

SEQ_HEADER = "mirrorbook-seq"
ORIGIN_HEADER = "mirrorbook-origin"
_POSITION = re.compile(r"^(end|begin|none|end-\d+|\d+)$")


class GroupSpec(BaseModel):
    """Where a group is parked on every partition: `end`, `end-N` (lagging by N), `N`, `begin`, `none`."""

    name: str
    position: str

    @classmethod
    def parse(cls, text: str) -> "GroupSpec":
        name, sep, pos = text.partition("=")
        if not sep or not name or not _POSITION.match(pos):
            raise MirrorbookError(f"Bad group spec {text!r}", "use NAME=end | NAME=end-N | NAME=N | NAME=begin | NAME=none")
        return cls(name=name, position=pos)

    def offset(self, high: int) -> int | None:
        if self.position == "none":
            return None
        if self.position == "end":
            return high
        if self.position == "begin":
            return 0
        if self.position.startswith("end-"):
            return max(0, high - int(self.position[4:]))
        return min(int(self.position), high)


class LoadReport(BaseModel):
    bootstrap: str
    topics: dict[str, int]
    produced: int
    high_watermarks: dict[str, int]
    groups: dict[str, dict[str, int]]


def record(topic: str, partition: int, seq: int, origin: str, pad: int = 0) -> tuple[bytes, bytes, list]:
    key = f"{topic}/{partition}/k{seq % 97}".encode()
    value = json.dumps({"topic": topic, "partition": partition, "seq": seq, "origin": origin,
                        "pad": "x" * pad}).encode()
    headers = [(SEQ_HEADER, str(seq).encode()), (ORIGIN_HEADER, origin.encode())]
    return key, value, headers


def produce(config: str | Mapping[str, Any], topics: list[str], records_per_partition: int, *,
            origin: str = "workload", pad: int = 0, admin: KafkaAdmin | None = None) -> int:
    """Append `records_per_partition` sequence-numbered records to every partition of `topics`."""
    admin = admin or KafkaAdmin(config)
    tps = admin.partitions(topics)
    start = admin.high_watermarks(tps)
    producer = Producer(client_config(config, **{"linger.ms": 20, "acks": "all", "enable.idempotence": True,
                                                 "batch.num.messages": 5000}))
    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    count = 0
    for tp in tps:
        for seq in range(start[tp], start[tp] + records_per_partition):
            key, value, headers = record(tp.topic, tp.partition, seq, origin, pad)
            while True:
                try:
                    producer.produce(tp.topic, value=value, key=key, partition=tp.partition, headers=headers,
                                     timestamp=int(time.time() * 1000), on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.05)
            count += 1
        producer.poll(0)
    remaining = producer.flush(60)
    if remaining or errors:
        raise MirrorbookError(f"Producing to {admin.bootstrap} failed: {remaining} undelivered; "
                              f"errors: {sorted(set(errors))[:3]}")
    return count


def park_groups(admin: KafkaAdmin, topics: list[str], groups: list[GroupSpec]) -> dict[str, dict[str, int]]:
    """Commit each group's offsets at its chosen position (groups must be inactive)."""
    tps = admin.partitions(topics)
    highs = admin.high_watermarks(tps)
    wanted: dict[str, dict[TP, int]] = {}
    for g in groups:
        offsets = {tp: g.offset(highs[tp]) for tp in tps}
        offsets = {tp: o for tp, o in offsets.items() if o is not None}
        if offsets:
            wanted[g.name] = offsets
    results = admin.alter_group_offsets(wanted)
    failed = {g: {str(tp): e for tp, e in r.items() if e != "OK"} for g, r in results.items()}
    failed = {g: r for g, r in failed.items() if r}
    if failed:
        raise MirrorbookError(f"Could not park consumer groups: {failed}")
    return {g: {str(tp): o for tp, o in sorted(offs.items())} for g, offs in wanted.items()}


def load(config: str | Mapping[str, Any], topics: list[str], partitions: int, records_per_partition: int,
         groups: list[GroupSpec] = (), *, pad: int = 0, origin: str = "workload") -> LoadReport:
    admin = KafkaAdmin(config)
    admin.create_topics({t: partitions for t in topics})
    produced = produce(config, topics, records_per_partition, origin=origin, pad=pad, admin=admin) \
        if records_per_partition else 0
    parked = park_groups(admin, topics, list(groups)) if groups else {}
    tps = admin.partitions(topics)
    return LoadReport(bootstrap=admin.bootstrap, topics={t: n for t, n in admin.topics().items() if t in topics},
                      produced=produced,
                      high_watermarks={str(tp): h for tp, h in sorted(admin.high_watermarks(tps).items())},
                      groups=parked)
