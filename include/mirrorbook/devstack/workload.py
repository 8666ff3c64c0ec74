"""The workload tool: topics, keyed sequence-numbered records, and consumer groups parked at chosen offsets.

Records on partition p of topic t carry `seq` = their offset on the cluster they were produced to
(seq continues from the partition's high watermark), so any consumer can prove it skipped or
re-read nothing by comparing sequence numbers.

`produce_transactional` writes as an exactly-once producer does: transactions across every partition of the
topics, some aborted, each ending with its marker — so the partitions end with a marker and their offsets are
not their records. Its records carry `seq` = their offset too (a transaction of n records on a partition whose
end is h takes offsets h..h+n-1, its marker h+n: the producer is the partition's only writer, and checks the
end offsets it predicted) and `mirrorbook-txn` = `committed` | `aborted`, so a test tells the records a
read_committed consumer sees from the aborted ones MirrorMaker 2 copies anyway (its source consumer reads
uncommitted unless configured otherwise).
"""

from __future__ import annotations

import re
import time
from typing import Any, Mapping, Sequence

from confluent_kafka import Producer
from pydantic import BaseModel

from mirrorbook.errors import MirrorbookError
from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.config import client_config
from mirrorbook.kafka.sequenced import record
from mirrorbook.kafka.types import TP

TXN_HEADER = "mirrorbook-txn"
TRANSACTIONAL_ID_PREFIX = "mirrorbook-workload"
_POSITION = re.compile(r"^(end|begin|none|end-\d+|\d+)$")


class GroupSpec(BaseModel):
    """Where a group is parked on every partition: `end`, `end-N` (lagging by N), `N`, `begin`, `none`."""

    name: str
    position: str

    @classmethod
    def parse(cls, text: str) -> "GroupSpec":
        name, sep, pos = text.partition("=")
        if not sep or not name or not _POSITION.match(pos):
            raise MirrorbookError(f"Bad group spec {text!r}",
                                  "use NAME=end | NAME=end-N | NAME=N | NAME=begin | NAME=none")
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


class TxnReport(BaseModel):
    """What `produce_transactional` wrote, per partition ("topic-p"): committed and aborted records, and the
    partition's end offset after it (markers included)."""

    committed: dict[str, int]
    aborted: dict[str, int]
    high_watermarks: dict[str, int]

    @property
    def produced(self) -> int:
        return sum(self.committed.values()) + sum(self.aborted.values())


def produce_transactional(config: str | Mapping[str, Any], topics: list[str], transactions: int,
                          records_per_partition: int, *, abort_every: int = 0, origin: str = "workload-txn",
                          pad: int = 0, admin: KafkaAdmin | None = None,
                          transactional_id: str | None = None) -> TxnReport:
    """`transactions` transactions, each writing `records_per_partition` records to every partition of `topics`;
    with `abort_every` k > 0, every k-th one (the k-th, 2k-th, ...) is aborted. Every partition ends with the
    last transaction's marker. Raises if a partition's end is not where its records and markers put it (another
    producer wrote to it meanwhile: the sequence numbers would not be offsets)."""
    admin = admin or KafkaAdmin(config)
    tps = admin.partitions(topics)
    end = admin.high_watermarks(tps)
    producer = Producer(client_config(config, **{
        "transactional.id": transactional_id or f"{TRANSACTIONAL_ID_PREFIX}-{origin}-{'-'.join(sorted(topics))}"[:200],
        "linger.ms": 5, "acks": "all", "enable.idempotence": True}))
    producer.init_transactions(60)
    committed = {str(tp): 0 for tp in tps}
    aborted = {str(tp): 0 for tp in tps}
    for k in range(1, transactions + 1):
        abort = abort_every > 0 and k % abort_every == 0
        producer.begin_transaction()
        for tp in tps:
            for seq in range(end[tp], end[tp] + records_per_partition):
                key, value, headers = record(tp.topic, tp.partition, seq, origin, pad)
                producer.produce(tp.topic, value=value, key=key, partition=tp.partition,
                                 headers=headers + [(TXN_HEADER, b"aborted" if abort else b"committed")],
                                 timestamp=int(time.time() * 1000))
            end[tp] += records_per_partition + (1 if records_per_partition else 0)  # the records, then the marker
            (aborted if abort else committed)[str(tp)] += records_per_partition
        if abort:
            # Sent first: an abort drops what the producer still holds, and aborted records that never reached
            # the log would be no aborted records at all.
            producer.flush(60)
            producer.abort_transaction(60)
        else:
            producer.commit_transaction(60)
    # The commit returns once the coordinator logged it; the last markers are written to the partitions after.
    deadline = time.monotonic() + 30
    while (highs := admin.high_watermarks(tps)) != end and time.monotonic() < deadline \
            and all(highs[tp] <= end[tp] for tp in tps):
        time.sleep(0.05)
    wrong = {str(tp): (end[tp], highs[tp]) for tp in tps if highs[tp] != end[tp]}
    if wrong:
        raise MirrorbookError(f"Transactional workload on {admin.bootstrap}: end offsets (predicted, found) differ "
                              f"{wrong}: another producer wrote to these partitions, so seq is not the offset")
    return TxnReport(committed=committed, aborted=aborted,
                     high_watermarks={str(tp): h for tp, h in sorted(highs.items())})


def park_groups(admin: KafkaAdmin, topics: list[str], groups: list[GroupSpec]) -> dict[str, dict[str, int]]:
    """Commit each group's offsets at its chosen position (groups must be inactive)."""
    tps = admin.partitions(topics)
    highs = admin.high_watermarks(tps)
    wanted: dict[str, dict[TP, int]] = {}
    for g in groups:
        offsets = {tp: o for tp in tps if (o := g.offset(highs[tp])) is not None}
        if offsets:
            wanted[g.name] = offsets
    results = admin.alter_group_offsets(wanted)
    failed = {g: {str(tp): e for tp, e in r.items() if e != "OK"} for g, r in results.items()}
    failed = {g: r for g, r in failed.items() if r}
    if failed:
        raise MirrorbookError(f"Could not park consumer groups: {failed}")
    return {g: {str(tp): o for tp, o in sorted(offs.items())} for g, offs in wanted.items()}


def load(config: str | Mapping[str, Any], topics: list[str], partitions: int, records_per_partition: int,
         groups: Sequence[GroupSpec] = (), *, pad: int = 0, origin: str = "workload", transactions: int = 0,
         abort_every: int = 0) -> LoadReport:
    """Topics, records and parked groups. With `transactions`, the records are written in that many transactions
    of `records_per_partition` records per partition each (`produce_transactional`)."""
    admin = KafkaAdmin(config)
    admin.create_topics({t: partitions for t in topics})
    if transactions and records_per_partition:
        produced = produce_transactional(config, topics, transactions, records_per_partition, abort_every=abort_every,
                                         origin=origin, pad=pad, admin=admin).produced
    else:
        produced = produce(config, topics, records_per_partition, origin=origin, pad=pad, admin=admin) \
            if records_per_partition else 0
    parked = park_groups(admin, topics, list(groups)) if groups else {}
    tps = admin.partitions(topics)
    return LoadReport(bootstrap=admin.bootstrap, topics={t: n for t, n in admin.topics().items() if t in topics},
                      produced=produced,
                      high_watermarks={str(tp): h for tp, h in sorted(admin.high_watermarks(tps).items())},
                      groups=parked)
