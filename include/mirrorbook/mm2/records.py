"""Byte-exact codecs for MM2's internal records (Kafka protocol types, big-endian).

STRING = int16 length + UTF-8; INT16/32/64 signed big-endian. Checkpoint and Heartbeat values
start with an INT16 version (0); OffsetSync values have no version header. A record that does not
decode raises `MalformedRecord` (readers skip it with a warning).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mirrorbook.errors import MirrorbookError


class MalformedRecord(MirrorbookError):
    pass


class _Reader:
    def __init__(self, data: bytes | None, what: str) -> None:
        if data is None:
            raise MalformedRecord(f"{what}: null payload")
        self.data, self.pos, self.what = data, 0, what

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise MalformedRecord(f"{self.what}: truncated at byte {self.pos} (needs {n} of {len(self.data)})")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        return struct.unpack(">h", self._take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self._take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self._take(8))[0]

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise MalformedRecord(f"{self.what}: negative string length {n}")
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedRecord(f"{self.what}: invalid UTF-8 ({exc})")

    def version(self, supported: int = 0) -> int:
        v = self.int16()
        if v != supported:
            raise MalformedRecord(f"{self.what}: unsupported version {v}")
        return v


def _string(s: str) -> bytes:
    b = s.encode("utf-8")
    if len(b) > 32767:
        raise ValueError("STRING longer than 32767 bytes")
    return struct.pack(">h", len(b)) + b


@dataclass(frozen=True)
class Checkpoint:
    """A group's committed offset on the source, translated to the target (`topic` is the target topic)."""

    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def key_bytes(self) -> bytes:
        return _string(self.group) + _string(self.topic) + struct.pack(">i", self.partition)

    def value_bytes(self) -> bytes:
        return struct.pack(">hqq", 0, self.upstream_offset, self.downstream_offset) + _string(self.metadata)

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> "Checkpoint":
        k = _Reader(key, "checkpoint key")
        group, topic, partition = k.string(), k.string(), k.int32()
        v = _Reader(value, "checkpoint value")
        v.version()
        return cls(group, topic, partition, v.int64(), v.int64(), v.string())


@dataclass(frozen=True)
class OffsetSync:
    """An upstream→downstream offset pair MM2 recorded for a source topic-partition."""

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def key_bytes(self) -> bytes:
        return _string(self.topic) + struct.pack(">i", self.partition)

    def value_bytes(self) -> bytes:
        return struct.pack(">qq", self.upstream_offset, self.downstream_offset)

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> "OffsetSync":
        k = _Reader(key, "offset-sync key")
        topic, partition = k.string(), k.int32()
        v = _Reader(value, "offset-sync value")
        return cls(topic, partition, v.int64(), v.int64())


@dataclass(frozen=True)
class Heartbeat:
    source_cluster_alias: str
    target_cluster_alias: str
    timestamp_ms: int

    def key_bytes(self) -> bytes:
        return _string(self.source_cluster_alias) + _string(self.target_cluster_alias)

    def value_bytes(self) -> bytes:
        return struct.pack(">hq", 0, self.timestamp_ms)

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> "Heartbeat":
        k = _Reader(key, "heartbeat key")
        src, dst = k.string(), k.string()
        v = _Reader(value, "heartbeat value")
        v.version()
        return cls(src, dst, v.int64())
