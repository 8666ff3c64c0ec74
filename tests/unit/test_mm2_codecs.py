"""MM2 record codecs (byte-exact) and the internal-topic scanners' handling of malformed records."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import Message

from mirrorbook.kafka.types import TP
from mirrorbook.mm2 import internal_topics as it
from mirrorbook.mm2.records import Checkpoint, Heartbeat, MalformedRecord, OffsetSync

# Kafka's CheckpointTest vector; bytes spelled out: STRING = int16 length + UTF-8, big-endian ints.
VECTOR = Checkpoint("group-1", "topic-2", 3, 4, 5, "metadata-6")
VECTOR_KEY = bytes.fromhex("0007") + b"group-1" + bytes.fromhex("0007") + b"topic-2" + bytes.fromhex("00000003")
VECTOR_VALUE = (bytes.fromhex("0000")                 # version 0
                + bytes.fromhex("0000000000000004")   # upstream offset
                + bytes.fromhex("0000000000000005")   # downstream offset
                + bytes.fromhex("000a") + b"metadata-6")


def msg(key: bytes | None, value: bytes | None, offset: int = 0, topic: str = "A.checkpoints.internal",
        ts: int = 0) -> Message:
    return Message(topic=topic, partition=0, offset=offset, key=key, value=value, timestamp=(1, ts))


def test_checkpoint_vector_is_byte_exact():
    assert VECTOR.key_bytes() == VECTOR_KEY
    assert VECTOR.value_bytes() == VECTOR_VALUE
    assert Checkpoint.decode(VECTOR_KEY, VECTOR_VALUE) == VECTOR
    # The fast path decodes the same bytes to the same fields.
    assert it.decode_checkpoint_key(VECTOR_KEY) == ("group-1", "topic-2", 3)
    assert it.checkpoint_value_ok(VECTOR_VALUE)
    assert it.decode_checkpoint_value(VECTOR_VALUE) == (4, 5, "metadata-6")


@pytest.mark.parametrize("cp", [Checkpoint("g", "A.t", 0, 0, 0),
                                Checkpoint("grüppe", "A.tøpic", 2**31 - 1, 2**63 - 1, 7, "m" * 300)])
def test_checkpoint_round_trips(cp):
    assert Checkpoint.decode(cp.key_bytes(), cp.value_bytes()) == cp
    log = it.scan_checkpoints(iter([msg(cp.key_bytes(), cp.value_bytes())]), "t")
    assert list(log.latest.values()) == [cp]


def test_offset_sync_and_heartbeat_round_trip():
    sync = OffsetSync("orders", 7, 1234, 987)
    assert sync.key_bytes() == bytes.fromhex("0006") + b"orders" + bytes.fromhex("00000007")
    assert sync.value_bytes() == (1234).to_bytes(8, "big") + (987).to_bytes(8, "big")  # no version header
    assert OffsetSync.decode(sync.key_bytes(), sync.value_bytes()) == sync
    assert it.decode_offset_sync(sync.key_bytes(), sync.value_bytes()) == sync
    hb = Heartbeat("A", "B", 1_700_000_000_123)
    assert hb.value_bytes() == bytes.fromhex("0000") + (1_700_000_000_123).to_bytes(8, "big")
    assert Heartbeat.decode(hb.key_bytes(), hb.value_bytes()) == hb
    assert it.decode_heartbeat(hb.key_bytes(), hb.value_bytes()) == hb


MALFORMED_CHECKPOINTS = [
    (None, VECTOR_VALUE),                           # null key
    (VECTOR_KEY, None),                             # tombstone
    (VECTOR_KEY[:-2], VECTOR_VALUE),                # key truncated in the partition
    (bytes.fromhex("ffff") + VECTOR_KEY[2:], VECTOR_VALUE),  # negative string length
    (VECTOR_KEY, bytes.fromhex("0001") + VECTOR_VALUE[2:]),  # unsupported version
    (VECTOR_KEY, VECTOR_VALUE[:-1]),                # metadata runs past the end
    (VECTOR_KEY, VECTOR_VALUE[:10]),                # value truncated in an offset
]


@pytest.mark.parametrize("key,value", MALFORMED_CHECKPOINTS)
def test_records_codec_rejects_malformed(key, value):
    with pytest.raises(MalformedRecord):
        Checkpoint.decode(key, value)


def test_scan_checkpoints_skips_malformed_keeps_last_good(caplog):
    good1 = Checkpoint("g", "A.t", 0, 10, 10)
    good2 = Checkpoint("g", "A.t", 0, 20, 19)
    other = Checkpoint("h", "A.t", 1, 5, 5)
    records = [msg(good1.key_bytes(), good1.value_bytes(), 0), msg(other.key_bytes(), other.value_bytes(), 1),
               msg(good2.key_bytes(), good2.value_bytes(), 2)]
    # Malformed records *after* the good ones must not erase them (Kafka skips what it cannot decode).
    records += [msg(k, v, 3 + i) for i, (k, v) in enumerate(MALFORMED_CHECKPOINTS)]
    with caplog.at_level(logging.WARNING, logger="mirrorbook.mm2.internal_topics"):
        log = it.scan_checkpoints(iter(records), "A.checkpoints.internal")
    assert log.records == 3 + len(MALFORMED_CHECKPOINTS)
    assert log.malformed == len(MALFORMED_CHECKPOINTS)
    assert log.offsets() == {"g": {TP("A.t", 0): 19}, "h": {TP("A.t", 1): 5}}
    assert sum("skipping malformed record" in r.message for r in caplog.records) == it.MAX_LOGGED_MALFORMED
    assert any("skipped 7 malformed records of 10" in r.message for r in caplog.records)
    assert any("tombstone" in r.message for r in caplog.records)


def test_scan_checkpoints_filters_groups_but_still_counts_malformed():
    cps = [Checkpoint(g, "A.t", 0, 1, 1) for g in ("keep-1", "drop-1", "keep-2")]
    records = [msg(c.key_bytes(), c.value_bytes(), i) for i, c in enumerate(cps)]
    records.append(msg(Checkpoint("drop-1", "A.t", 0, 0, 0).key_bytes(), b"\x00", 9))
    log = it.scan_checkpoints(iter(records), "t", group_filter=lambda g: g.startswith("keep"))
    assert log.groups() == {"keep-1", "keep-2"}
    assert log.malformed == 1


def test_checkpoint_decoding_follows_java_leniency():
    # Trailing bytes are ignored and bad UTF-8 is replaced, as Java's Schema.read/new String do.
    log = it.scan_checkpoints(iter([msg(VECTOR_KEY + b"junk", VECTOR_VALUE[:-12] + bytes.fromhex("000a")
                                        + b"meta\xffdata-")]), "t")
    (cp,) = log.latest.values()
    assert (cp.group, cp.topic, cp.partition, cp.upstream_offset, cp.downstream_offset) == \
        ("group-1", "topic-2", 3, 4, 5)
    assert cp.metadata == "meta\ufffddata-"
    assert log.malformed == 0


def test_scan_offset_syncs_and_heartbeats_skip_malformed():
    s1, s2 = OffsetSync("t", 0, 0, 0), OffsetSync("t", 0, 101, 101)
    syncs = [msg(s1.key_bytes(), s1.value_bytes(), 0), msg(s1.key_bytes(), b"\x00" * 15, 1),
             msg(None, s2.value_bytes(), 2), msg(s2.key_bytes(), None, 3), msg(s2.key_bytes(), s2.value_bytes(), 4)]
    log = it.scan_offset_syncs(iter(syncs), "mm2-offset-syncs.B.internal")
    assert (log.records, log.malformed) == (5, 3)
    assert log.syncs == {TP("t", 0): [s1, s2]}

    hb = Heartbeat("A", "B", 5)
    beats = [msg(hb.key_bytes(), hb.value_bytes()), msg(hb.key_bytes(), bytes.fromhex("0001") + bytes(8)),
             msg(b"\x00", hb.value_bytes()), msg(hb.key_bytes(), Heartbeat("A", "B", 9).value_bytes())]
    hlog = it.scan_heartbeats(iter(beats), "heartbeats")
    assert (hlog.records, hlog.malformed) == (4, 2)
    assert hlog.latest() == {("A", "B"): Heartbeat("A", "B", 9)}


def test_one_read_of_several_topics_feeds_each_scanner_in_runs_decoding_each_key_once(monkeypatch):
    """One consumer reading a heartbeats and a checkpoints topic hands out their records interleaved. Fed
    run by run, each scanner ends where a read of its own topic would; a checkpoint key is decoded once
    however many runs it comes back in."""
    cps = "A.checkpoints.internal"
    g0, g1, h = Checkpoint("g", "A.t", 0, 10, 10), Checkpoint("g", "A.t", 0, 20, 19), Checkpoint("h", "A.t", 1, 5, 5)
    hb1, hb2 = Heartbeat("A", "B", 100), Heartbeat("A", "B", 200)
    records = [msg(g0.key_bytes(), g0.value_bytes(), 0, cps, ts=1000),
               msg(hb1.key_bytes(), hb1.value_bytes(), 0, "heartbeats"),
               msg(h.key_bytes(), h.value_bytes(), 1, cps, ts=1500),
               msg(g0.key_bytes(), g0.value_bytes(), 2, cps, ts=2000),
               msg(hb2.key_bytes(), hb2.value_bytes(), 1, "heartbeats"),
               msg(g1.key_bytes(), g1.value_bytes(), 3, cps, ts=3000)]
    alone = it.scan_checkpoints(iter(r for r in records if r.topic() == cps), cps)

    decoded: list[bytes] = []
    real = it.decode_checkpoint_key
    monkeypatch.setattr(it, "decode_checkpoint_key", lambda key: decoded.append(key) or real(key))
    scanners = {cps: it.CheckpointScanner(cps), "heartbeats": it.HeartbeatScanner("heartbeats")}
    it.scan_topics(iter(records), scanners)
    log = scanners[cps].result()
    assert log == alone and log.records == 4
    assert log.offsets() == {"g": {TP("A.t", 0): 19}, "h": {TP("A.t", 1): 5}}
    assert log.newest_ms() == {"g": 3000, "h": 1500}  # the record time of each group's newest checkpoint
    assert sorted(decoded) == sorted([g0.key_bytes(), h.key_bytes()])
    assert scanners["heartbeats"].result().latest() == {("A", "B"): hb2}


def test_internal_topic_names():
    assert it.checkpoints_topic("A") == "A.checkpoints.internal"
    assert it.offset_syncs_topic("A", "B") == "mm2-offset-syncs.B.internal"  # on the source
    assert it.offset_syncs_topic("A", "B", "target") == "mm2-offset-syncs.A.internal"  # on the target
