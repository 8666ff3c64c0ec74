"""Reading partitions between two offsets without a consumer group (assign, never subscribe/commit).

Used for MM2's internal topics (read to their end), for precise translation windows, for counting records
(`kafka.records`), and by tests that prove what a consumer would see.

Isolation: `read_committed` (librdkafka's default, and what a consumer of a transactional topic uses) yields
committed records only, and never reads past the last stable offset (an open transaction); `read_uncommitted`
yields aborted records too (what MirrorMaker 2's source consumer reads unless told otherwise). Neither yields
transaction markers: they take offsets but are never records.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Iterator, Literal, Mapping, Protocol, cast

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from mirrorbook.errors import MirrorbookError
from mirrorbook.kafka.config import client_config
from mirrorbook.kafka.types import TP


class ReadTimeout(MirrorbookError):
    pass


class Consumed(Protocol):
    """A message a consumer of assigned partitions returns, as the reads here see it: confluent_kafka's Message,
    whose stub allows None for topic, partition and offset because a client-level error event has none. A
    record, and an end-of-partition event, always has them; other error events are raised on."""

    def topic(self) -> str: ...
    def partition(self) -> int: ...
    def offset(self) -> int: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def headers(self) -> list[tuple[str, bytes | None]] | None: ...
    def timestamp(self) -> tuple[int, int]: ...
    def error(self) -> KafkaError | None: ...


def _consumer(config: str | Mapping[str, Any], **extra: Any) -> Consumer:
    return Consumer(client_config(config, **{
        "group.id": f"mirrorbook-reader-{uuid.uuid4().hex[:8]}",  # required by librdkafka; never committed
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        # The end of a partition is an event: a range whose last offsets are transaction markers (or aborted
        # records, read_committed) holds no record at or past its last offset, and a consumer that returned
        # nothing has no position to compare with its end — the end-of-partition event's offset is that end.
        "enable.partition.eof": True,
        "fetch.max.bytes": 16 * 1024 * 1024,
        "queued.max.messages.kbytes": 65536,
        # Bulk reads to a known end: prefetch deep, and never let the broker hold a fetch at the tail.
        "queued.min.messages": 1_000_000,
        "fetch.wait.max.ms": 10,
        **extra,
    }))


Isolation = Literal["read_committed", "read_uncommitted"]


def read_ranges(config: str | Mapping[str, Any], ranges: Mapping[TP, tuple[int, int]], *,
                timeout_s: float = 60.0, batch: int = 5000,
                isolation: Isolation = "read_committed") -> Iterator[Consumed]:
    """Yield every record with start <= offset < end for each partition, in offset order per partition.

    Offsets missing from a partition (compaction, transaction markers, aborted records read_committed) are
    simply not yielded; the read ends per partition once a record at or past `end - 1` was seen, or the
    position or the partition's end (as this isolation level sees it) reaches `end`. Read committed, a range
    past the last stable offset waits for the open transaction (up to `timeout_s`): clip it first.
    """
    # Keyed by plain tuples too: a record's (topic, partition) finds its TP (a million a read: no TP made).
    pending: dict[tuple[str, int], tuple[int, int]] = {tp: (s, e) for tp, (s, e) in ranges.items() if e > s}
    if not pending:
        return
    consumer = _consumer(config, **{"isolation.level": isolation})
    try:
        consumer.assign([TopicPartition(topic, partition, max(s, 0)) for (topic, partition), (s, _) in pending.items()])
        deadline = time.monotonic() + timeout_s
        while pending:
            # A short timeout: consume() waits it out whenever fewer than `batch` records are left.
            msgs = cast("list[Consumed]", consumer.consume(num_messages=batch, timeout=0.05))
            done: list[TopicPartition] = []
            for m in msgs:
                err = m.error()
                if err:
                    if err.code() == KafkaError._PARTITION_EOF:
                        eof = (m.topic(), m.partition())
                        if eof in pending and m.offset() >= pending[eof][1]:
                            pending.pop(eof, None)
                        continue
                    raise MirrorbookError(f"reading {m.topic()}-{m.partition()}: {err.str()}")
                key = (m.topic(), m.partition())
                rng = pending.get(key)
                if rng is None:
                    continue
                offset = m.offset()
                if offset < rng[1]:
                    yield m
                if offset >= rng[1] - 1:
                    pending.pop(key, None)
                    done.append(TopicPartition(*key))
            if done:  # one call for the batch: each pause is a round trip through librdkafka's queues
                consumer.pause(done)
            if msgs:
                deadline = time.monotonic() + timeout_s
                continue
            # No records: partitions whose position already reached `end` (gaps at the tail) are done.
            positions = consumer.position([TopicPartition(*tp) for tp in pending])
            for p in positions:
                tp = (p.topic, p.partition)
                if p.offset >= 0 and p.offset >= pending[tp][1]:
                    pending.pop(tp, None)
            if pending and time.monotonic() > deadline:
                raise ReadTimeout(f"timed out reading {', '.join(str(TP(*tp)) for tp in pending)} "
                                  f"(no record for {timeout_s:.0f}s)")
    finally:
        consumer.close()


__all__ = ["read_ranges", "ReadTimeout", "OFFSET_BEGINNING", "Isolation", "Consumed"]
