"""Readers for MM2's internal topics: checkpoints, offset-syncs and heartbeats, read to their end.

"End" is the high watermark at call time (read with `mirrorbook.kafka.reader.read_ranges`), so a read is a
consistent snapshot even while MM2 keeps writing. A record that does not decode is skipped, counted
(`malformed`) and logged (the first few individually, then a summary) — never a crash: one bad
record must not block a failover.

Decoding is hand-rolled on `struct` rather than `records.*.decode` because the checkpoints topic of
a busy cluster holds millions of records: per record we do one dict lookup on the raw key (keys
repeat, so each distinct key is decoded once) and a length/version check of the value; values are
fully decoded only for the last checkpoint per (group, topic, partition). The scanners take records in
runs (`feed`), so one consumer can read several of these topics at once (`scan_topics`: the health
check reads a target's heartbeats and checkpoints topics together). Semantics match Kafka's
`Checkpoint/OffsetSync/Heartbeat.deserializeRecord`: trailing bytes are ignored, malformed UTF-8 is
replaced (Java's `new String(bytes, UTF_8)`); we are stricter in one place — a value version other
than 0 is malformed (Kafka only `assert`s it), since a future layout must not be misread.
"""

from __future__ import annotations

import itertools
import operator
import struct
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Literal, Mapping


from mirrorbook.errors import MirrorbookError
from mirrorbook.kafka.admin import KafkaAdmin, KafkaAdminError
from mirrorbook.kafka.reader import Consumed, read_ranges
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.policy import HEARTBEATS, ReplicationPolicy
from mirrorbook.mm2.records import Checkpoint, Heartbeat, OffsetSync
from mirrorbook.redaction import get_logger

log = get_logger(__name__)

Config = str | Mapping[str, Any]
OffsetSyncsLocation = Literal["source", "target"]
GroupKey = tuple[str, str, int]  # (group, target topic, partition)

MAX_LOGGED_MALFORMED = 5
_DEFAULT_POLICY = ReplicationPolicy()
_QQ = struct.Struct(">qq")
_QQH = struct.Struct(">qqh")
_HQ = struct.Struct(">hq")
_I = struct.Struct(">i")
_FILTERED = object()  # a well-formed checkpoint key whose group the caller does not want
_MISSING = object()


class InternalTopicMissing(MirrorbookError):
    pass


# -- topic names ----------------------------------------------------------------------------------

def checkpoints_topic(source_alias: str, policy: ReplicationPolicy | None = None) -> str:
    """`<source>.checkpoints.internal`, which lives on the target cluster."""
    return (policy or _DEFAULT_POLICY).checkpoints_topic(source_alias)


def offset_syncs_topic(source_alias: str, target_alias: str, location: OffsetSyncsLocation = "source",
                       policy: ReplicationPolicy | None = None) -> str:
    """MM2 names the offset-syncs topic after the *other* cluster: on the source it is
    `mm2-offset-syncs.<target>.internal`, with `offset-syncs.topic.location=target` it is
    `mm2-offset-syncs.<source>.internal` on the target."""
    alias = target_alias if location == "source" else source_alias
    return (policy or _DEFAULT_POLICY).offset_syncs_topic(alias)


# -- results --------------------------------------------------------------------------------------

@dataclass
class TopicRead:
    """What a read covered: the topic, how many records it saw and how many it had to skip."""

    topic: str
    records: int = 0
    malformed: int = 0

    def _bad(self, msg: Consumed, why: str) -> None:
        self.malformed += 1
        if self.malformed <= MAX_LOGGED_MALFORMED:
            log.warning("skipping malformed record %s-%d@%d: %s", msg.topic(), msg.partition(), msg.offset(), why)

    def _summary(self) -> None:
        if self.malformed > MAX_LOGGED_MALFORMED:
            log.warning("skipped %d malformed records of %d in %s (first %d logged)",
                        self.malformed, self.records, self.topic, MAX_LOGGED_MALFORMED)


@dataclass
class CheckpointLog(TopicRead):
    """The last checkpoint per (group, target topic, partition) — Kafka's "last one wins" per group."""

    latest: dict[GroupKey, Checkpoint] = field(default_factory=dict)
    written_ms: dict[GroupKey, int] = field(default_factory=dict)  # record timestamp of each `latest`

    def groups(self) -> set[str]:
        return {g for g, _, _ in self.latest}

    def newest_ms(self) -> dict[str, int]:
        """group → record timestamp of its newest checkpoint (-1: the records carry none)."""
        out: dict[str, int] = {}
        for (g, _, _), ms in self.written_ms.items():
            out[g] = max(out.get(g, -1), ms)
        return out

    def by_group(self) -> dict[str, dict[TP, Checkpoint]]:
        out: dict[str, dict[TP, Checkpoint]] = {}
        for (g, t, p), cp in self.latest.items():
            out.setdefault(g, {})[TP(t, p)] = cp
        return out

    def offsets(self) -> dict[str, dict[TP, int]]:
        """group → target partition → downstream offset (what a consumer on the target seeks to)."""
        return {g: {tp: cp.downstream_offset for tp, cp in cps.items()} for g, cps in self.by_group().items()}


@dataclass
class OffsetSyncLog(TopicRead):
    """Every offset sync per *source* partition, in the order MM2 wrote them."""

    syncs: dict[TP, list[OffsetSync]] = field(default_factory=dict)


@dataclass
class HeartbeatLog(TopicRead):
    heartbeats: list[Heartbeat] = field(default_factory=list)

    def latest(self) -> dict[tuple[str, str], Heartbeat]:
        """(source alias, target alias) → newest heartbeat by timestamp."""
        out: dict[tuple[str, str], Heartbeat] = {}
        for hb in self.heartbeats:
            key = (hb.source_cluster_alias, hb.target_cluster_alias)
            if key not in out or hb.timestamp_ms >= out[key].timestamp_ms:
                out[key] = hb
        return out


# -- low-level decoding (Java semantics, see module docstring) -------------------------------------

def _string(buf: bytes, pos: int) -> tuple[str, int]:
    """A Kafka STRING at `pos`: int16 length + UTF-8. Raises ValueError/struct.error when it does not fit."""
    n = (buf[pos] << 8) | buf[pos + 1]
    if n & 0x8000:
        raise ValueError(f"negative string length at byte {pos}")
    end = pos + 2 + n
    if end > len(buf):
        raise ValueError(f"string at byte {pos} runs past the end ({end} > {len(buf)})")
    return buf[pos + 2:end].decode("utf-8", "replace"), end


def decode_checkpoint_key(key: bytes | None) -> GroupKey:
    if key is None:
        raise ValueError("null key")
    group, pos = _string(key, 0)
    topic, pos = _string(key, pos)
    return group, topic, _I.unpack_from(key, pos)[0]


def checkpoint_value_ok(value: bytes | None) -> bool:
    """Cheap full validity check of a checkpoint value (version 0, two INT64s, a STRING that fits)."""
    if value is None or len(value) < 20 or value[0] or value[1]:
        return False
    n = (value[18] << 8) | value[19]
    return not n & 0x8000 and 20 + n <= len(value)


def decode_checkpoint_value(value: bytes) -> tuple[int, int, str]:
    """(upstream, downstream, metadata) of a value that passed `checkpoint_value_ok`."""
    upstream, downstream, n = _QQH.unpack_from(value, 2)
    return upstream, downstream, value[20:20 + n].decode("utf-8", "replace")


def decode_offset_sync(key: bytes | None, value: bytes | None) -> OffsetSync:
    if key is None or value is None:
        raise ValueError("null key or value")
    topic, pos = _string(key, 0)
    partition = _I.unpack_from(key, pos)[0]
    upstream, downstream = _QQ.unpack_from(value, 0)
    return OffsetSync(topic, partition, upstream, downstream)


def decode_heartbeat(key: bytes | None, value: bytes | None) -> Heartbeat:
    if key is None or value is None:
        raise ValueError("null key or value")
    src, pos = _string(key, 0)
    dst, _ = _string(key, pos)
    version, ts = _HQ.unpack_from(value, 0)
    if version != 0:
        raise ValueError(f"unsupported version {version}")
    return Heartbeat(src, dst, ts)


def _why_checkpoint(key: bytes | None, value: bytes | None) -> str:
    try:
        decode_checkpoint_key(key)
    except (ValueError, IndexError, struct.error) as exc:
        return f"checkpoint key: {exc or 'truncated'}"
    if value is None:
        return "checkpoint value: null (tombstone)"
    if len(value) >= 2 and (value[0] or value[1]):
        return f"checkpoint value: unsupported version {int.from_bytes(value[:2], 'big', signed=True)}"
    return f"checkpoint value: truncated or bad metadata length ({len(value)} bytes)"


# -- reading --------------------------------------------------------------------------------------

def _records(config: Config, topic: str, timeout_s: float) -> Iterator[Consumed]:
    """Every record of `topic` up to the high watermarks at call time."""
    admin = KafkaAdmin(config)
    try:
        marks = admin.watermarks(admin.partitions([topic]))
    except KafkaAdminError as exc:
        raise InternalTopicMissing(str(exc), "check that the MM2 connectors of this flow run and that the "
                                             "cluster/location is right") from exc
    return read_ranges(config, {tp: (w.low, w.high) for tp, w in marks.items()}, timeout_s=timeout_s)


class CheckpointScanner:
    """Reduces checkpoint records, fed in one run or many, to the last one per (group, topic, partition)."""

    def __init__(self, topic: str, group_filter: Callable[[str], bool] | None = None) -> None:
        self._out = CheckpointLog(topic=topic)
        self._filter = group_filter
        self._keys: dict[bytes | None, Any] = {}  # raw key -> GroupKey, _FILTERED or None (malformed)
        self._latest: dict[GroupKey, Consumed] = {}

    def feed(self, messages: Iterable[Consumed]) -> None:
        out, keys, latest, group_filter = self._out, self._keys, self._latest, self._filter
        records = 0
        for m in messages:
            records += 1
            k = m.key()
            gk = keys.get(k, _MISSING)
            if gk is _MISSING:
                gk = keys[k] = _checkpoint_key(k, group_filter)
            v = m.value()
            if gk is None or not checkpoint_value_ok(v):
                out._bad(m, _why_checkpoint(k, v))
            elif gk is not _FILTERED:
                latest[gk] = m
        out.records += records

    def result(self) -> CheckpointLog:
        out = self._out
        for gk, m in self._latest.items():
            value = m.value()
            assert value is not None, "feed keeps only values checkpoint_value_ok accepted"
            up, down, meta = decode_checkpoint_value(value)
            out.latest[gk] = Checkpoint(gk[0], gk[1], gk[2], up, down, meta)
            out.written_ms[gk] = m.timestamp()[1]
        out._summary()
        return out


def scan_checkpoints(messages: Iterable[Consumed], topic: str,
                     group_filter: Callable[[str], bool] | None = None) -> CheckpointLog:
    """Reduce checkpoint records to the last one per (group, topic, partition), in one pass."""
    scanner = CheckpointScanner(topic, group_filter)
    scanner.feed(messages)
    return scanner.result()


def _checkpoint_key(key: bytes | None, group_filter: Callable[[str], bool] | None) -> Any:
    try:
        gk = decode_checkpoint_key(key)
    except (ValueError, IndexError, struct.error):
        return None
    return gk if group_filter is None or group_filter(gk[0]) else _FILTERED


def read_checkpoints(config: Config, source_alias: str, *, policy: ReplicationPolicy | None = None,
                     group_filter: Callable[[str], bool] | None = None, timeout_s: float = 60.0) -> CheckpointLog:
    """Read `<source>.checkpoints.internal` on the target (`config`) to its end; keep the groups `group_filter`
    accepts."""
    topic = checkpoints_topic(source_alias, policy)
    return scan_checkpoints(_records(config, topic, timeout_s), topic, group_filter)


def scan_offset_syncs(messages: Iterator[Consumed], topic: str) -> OffsetSyncLog:
    out = OffsetSyncLog(topic=topic)
    tps: dict[bytes | None, TP] = {}  # a key decoded once (a partition's syncs share it)
    for m in messages:
        out.records += 1
        k, v = m.key(), m.value()
        try:
            tp = tps.get(k)
            if tp is None:
                sync = decode_offset_sync(k, v)
                tp = tps[k] = TP(sync.topic, sync.partition)
            else:
                if v is None:
                    raise ValueError("null value (tombstone)")
                up, down = _QQ.unpack_from(v, 0)
                sync = OffsetSync(tp.topic, tp.partition, up, down)
        except (ValueError, IndexError, struct.error) as exc:
            out._bad(m, f"offset sync: {exc or 'truncated'}")
            continue
        out.syncs.setdefault(tp, []).append(sync)
    out._summary()
    return out


def read_offset_syncs(config: Config, source_alias: str, target_alias: str, *,
                      location: OffsetSyncsLocation = "source", policy: ReplicationPolicy | None = None,
                      timeout_s: float = 60.0) -> OffsetSyncLog:
    """Read the flow's offset-syncs topic to its end. `config` is the cluster named by `location`."""
    topic = offset_syncs_topic(source_alias, target_alias, location, policy)
    return scan_offset_syncs(_records(config, topic, timeout_s), topic)


class HeartbeatScanner:
    """Decodes heartbeat records, fed in one run or many."""

    def __init__(self, topic: str) -> None:
        self._out = HeartbeatLog(topic=topic)

    def feed(self, messages: Iterable[Consumed]) -> None:
        out = self._out
        for m in messages:
            out.records += 1
            try:
                out.heartbeats.append(decode_heartbeat(m.key(), m.value()))
            except (ValueError, IndexError, struct.error) as exc:
                out._bad(m, f"heartbeat: {exc or 'truncated'}")

    def result(self) -> HeartbeatLog:
        self._out._summary()
        return self._out


def scan_heartbeats(messages: Iterable[Consumed], topic: str) -> HeartbeatLog:
    scanner = HeartbeatScanner(topic)
    scanner.feed(messages)
    return scanner.result()


Scanner = CheckpointScanner | HeartbeatScanner
_topic_of = operator.methodcaller("topic")


def scan_topics(messages: Iterable[Consumed], scanners: Mapping[str, Scanner]) -> None:
    """Feed records read from several MM2 topics by one consumer to each topic's scanner. A consumer hands
    out a partition's records in runs, and each run goes to its scanner whole, so the per-record loop
    stays the scanner's own."""
    for topic, run in itertools.groupby(messages, key=_topic_of):
        scanners[topic].feed(run)


def read_heartbeats(config: Config, topic: str = HEARTBEATS, *, timeout_s: float = 60.0) -> HeartbeatLog:
    """Read any heartbeats topic (`heartbeats`, `A.heartbeats`, …) to its end."""
    return scan_heartbeats(_records(config, topic, timeout_s), topic)
