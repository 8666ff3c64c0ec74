"""The drill's canary workload: a producer writing sequence-numbered keyed records at a fixed rate, and
consumer groups that really consume and commit — on A before the cutover, on B after it.

Records are `mirrorbook.kafka.sequenced.record`s: `seq` is the record's offset on the cluster it was
produced to (one idempotent producer per partition, continuing from the high watermark), so what a
consumer reads proves, record by record, that nothing was skipped and what was read twice.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from mirrorbook.kafka.sequenced import record
from mirrorbook.errors import MirrorbookError
from mirrorbook.kafka.config import client_config
from mirrorbook.kafka.types import TP

Config = str | Mapping[str, Any]
ORIGIN = "dr-drill"


class CanaryError(MirrorbookError):
    pass


def _now() -> datetime:
    return datetime.now(timezone.utc)


class CanaryProducer:
    """Produces `rate` records/s round-robin over `tps` until stopped; seq continues from `start` per partition."""

    def __init__(self, config: Config, tps: list[TP], start: dict[TP, int], rate: float) -> None:
        self.tps, self.rate = tps, rate
        self.next = dict(start)
        self.errors: list[str] = []
        self._producer = Producer(client_config(config, **{"linger.ms": 5, "acks": "all",
                                                           "enable.idempotence": True}))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="drill-producer", daemon=True)

    @property
    def produced(self) -> int:
        return sum(self.next.values()) - sum(self._start.values())

    def start(self) -> "CanaryProducer":
        self._start = dict(self.next)
        self._thread.start()
        return self

    def _on_delivery(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))

    def _run(self) -> None:
        t0, sent, i = time.monotonic(), 0, 0
        while not self._stop.is_set():
            due = int((time.monotonic() - t0) * self.rate) - sent
            for _ in range(max(due, 0)):
                tp = self.tps[i % len(self.tps)]
                key, value, headers = record(tp.topic, tp.partition, self.next[tp], ORIGIN)
                self._producer.produce(tp.topic, value=value, key=key, partition=tp.partition, headers=headers,
                                       on_delivery=self._on_delivery)
                self.next[tp] += 1
                sent, i = sent + 1, i + 1
            self._producer.poll(0)
            self._stop.wait(0.01)

    def halt(self) -> None:
        """Stop producing (idempotent, never raises: also the clean-up path after a failure)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(30)

    def stop(self) -> None:
        """Stop producing and deliver everything produced; raise if any record was lost."""
        self.halt()
        left = self._producer.flush(60)
        if left or self.errors:
            raise CanaryError(f"The canary producer lost records: {left} undelivered, "
                              f"errors {sorted(set(self.errors))[:3]}")


@dataclass
class PartitionRead:
    """What one group read on one partition, by sequence number."""

    first_seq: int | None = None
    last_seq: int | None = None
    count: int = 0
    seqs: list[int] = field(default_factory=list)  # kept only where the proof needs every seq (on B)
    offset_mismatch: int = 0  # records whose seq is not their offset (on A, where seq == offset must hold)


@dataclass
class GroupRead:
    group: str
    reads: dict[TP, PartitionRead] = field(default_factory=dict)
    assigned_at: datetime | None = None
    first_record_at: datetime | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return sum(r.count for r in self.reads.values())


class CanaryConsumer:
    """A real member of `group`: subscribes, consumes, commits (every `commit_s` and when stopped), leaves.

    `max_rate` throttles it (records/s) so some groups lag behind the producer, as real ones do.
    `ends`: stop by itself once assigned and every listed partition was read up to that offset (resuming
    on B; list only partitions the group has records to read on — librdkafka knows no position before
    the first record).
    """

    def __init__(self, config: Config, group: str, topics: list[str], *, max_rate: float | None = None,
                 seq_is_offset: bool = True, keep_seqs: bool = False, ends: dict[TP, int] | None = None,
                 reset: str = "error", commit_s: float = 0.2) -> None:
        self.read = GroupRead(group=group)
        self.max_rate, self.seq_is_offset, self.keep_seqs, self.commit_s = max_rate, seq_is_offset, keep_seqs, commit_s
        self.ends = dict(ends) if ends is not None else None
        self._consumer = Consumer(client_config(config, **{
            "group.id": group, "enable.auto.commit": False, "auto.offset.reset": reset,
            "session.timeout.ms": 10000, "client.id": f"mirrorbook-drill-{group}"}))
        self._consumer.subscribe(topics, on_assign=self._on_assign)
        self._stop = threading.Event()
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"drill-{group}", daemon=True)

    def _on_assign(self, _consumer: Any, partitions: list[Any]) -> None:
        if partitions and self.read.assigned_at is None:
            self.read.assigned_at = _now()

    def start(self) -> "CanaryConsumer":
        self._thread.start()
        return self

    def _run(self) -> None:
        t0, consumed, last_commit = time.monotonic(), 0, time.monotonic()
        try:
            while not self._stop.is_set():
                for m in self._consumer.consume(num_messages=200, timeout=0.1):
                    err = m.error()
                    if err:
                        if err.code() != KafkaError._PARTITION_EOF:
                            raise KafkaException(err)
                        continue
                    self._take(m)
                    consumed += 1
                if self.ends is not None and self._reached_ends():
                    self.done.set()
                    break
                if time.monotonic() - last_commit >= self.commit_s:
                    self._commit(asynchronous=True)
                    last_commit = time.monotonic()
                if self.max_rate:
                    ahead = consumed / self.max_rate - (time.monotonic() - t0)
                    if ahead > 0:
                        self._stop.wait(ahead)
        except Exception as exc:  # reported by stop(): the drill fails with it
            self.read.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            self.done.set()

    def _take(self, m: Any) -> None:
        seq = json.loads(m.value())["seq"]
        tp = TP(m.topic(), m.partition())
        r = self.read.reads.setdefault(tp, PartitionRead())
        if self.read.first_record_at is None:
            self.read.first_record_at = _now()
        r.first_seq = seq if r.first_seq is None else r.first_seq
        r.last_seq, r.count = seq, r.count + 1
        if self.keep_seqs:
            r.seqs.append(seq)
        if self.seq_is_offset and seq != m.offset():
            r.offset_mismatch += 1
        if self.ends is not None and m.offset() + 1 >= self.ends.get(tp, 0):
            self.ends.pop(tp, None)

    def _reached_ends(self) -> bool:
        return self.read.assigned_at is not None and not self.ends

    # Literal, not bool: Consumer.commit is overloaded on each value (what it returns differs)
    def _commit(self, asynchronous: Literal[True, False]) -> None:
        try:
            self._consumer.commit(asynchronous=asynchronous)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._NO_OFFSET:  # nothing consumed since the last commit
                raise

    def wait(self, timeout_s: float) -> bool:
        return self.done.wait(timeout_s)

    def stop(self) -> GroupRead:
        """Stop consuming, commit what was read, leave the group (it becomes EMPTY)."""
        self._stop.set()
        self._thread.join(30)
        try:
            self._commit(asynchronous=False)
        except KafkaException as exc:
            self.read.errors.append(f"final commit: {exc}")
        finally:
            self._consumer.close()
        return self.read

