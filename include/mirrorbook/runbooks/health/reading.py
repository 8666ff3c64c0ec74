"""What one health pass reads: a target cluster's MM2 topics (once for every flow into it), the mirrored topics
on it (their ids and offsets, what TARGET_RESET compares) and a source cluster's committed group offsets (once
for every flow out of it).

- heartbeats: the newest heartbeat timestamp per (source, target) found on any heartbeats topic of the
  target (`heartbeats`, `A.heartbeats`, ...). Only the last `heartbeat_lookback_s` of those topics is
  read (start offsets by timestamp): MM2 writes one per second per flow, forever.
- checkpoints: `<source>.checkpoints.internal` read whole (an idle group's newest checkpoint can be
  old): the last checkpoint per (group, topic, partition) and its record timestamp.

Both are decoded by `mirrorbook.mm2.internal_topics`' scanners, fed by ONE consumer per target.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable


from mirrorbook.clients import Clients
from mirrorbook.kafka.reader import Consumed, read_ranges
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.internal_topics import CheckpointLog, CheckpointScanner, HeartbeatScanner, scan_topics
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.mm2.remote_cluster_utils import group_matcher
from mirrorbook.runbooks.health.loss import TargetTopic
from mirrorbook.runbooks.plan import INTERNAL_GROUPS
from mirrorbook.topology import FlowSpec


@dataclass
class TargetFreshness:
    """What one target cluster's MM2 topics show, read once for every flow into it."""

    cluster: str
    topics: dict[str, int] = field(default_factory=dict)  # the target's topic listing (topic -> partitions)
    heartbeats: dict[tuple[str, str], int] = field(default_factory=dict)  # (source, target) -> newest ts ms
    checkpoints: dict[str, CheckpointLog] = field(default_factory=dict)  # checkpoints topic -> its last ones
    malformed: int = 0
    error: str | None = None


def scan_target(messages: Iterable[Consumed], heartbeat_topics: set[str], checkpoint_topics: set[str],
                out: TargetFreshness) -> TargetFreshness:
    """Newest heartbeat per (source, target) over all `heartbeat_topics`; each checkpoints topic's last
    checkpoints. Records of other topics are not expected (the read covers these topics only)."""
    heartbeats = {t: HeartbeatScanner(t) for t in heartbeat_topics}
    checkpoints = {t: CheckpointScanner(t) for t in checkpoint_topics}
    scan_topics(messages, {**heartbeats, **checkpoints})
    for hb_scanner in heartbeats.values():
        log = hb_scanner.result()
        out.malformed += log.malformed
        for pair, hb in log.latest().items():
            out.heartbeats[pair] = max(out.heartbeats.get(pair, -1), hb.timestamp_ms)
    for topic, cp_scanner in checkpoints.items():
        out.checkpoints[topic] = cp_scanner.result()
        out.malformed += out.checkpoints[topic].malformed
    return out


def read_target(clients: Clients, target: str, flows: list[FlowSpec], since_ms: int,
                timeout_s: float = 30.0) -> TargetFreshness:
    """One listing, one watermark batch, one by-timestamp lookup and ONE consumer read for all `flows` into `target`."""
    out = TargetFreshness(cluster=target)
    admin = clients.admin(target)
    out.topics = admin.topics()
    policies = {ReplicationPolicy.for_flow(f) for f in flows}
    heartbeats = {t for t in out.topics if any(p.is_heartbeats_topic(t) for p in policies)}
    checkpoints = {ReplicationPolicy.for_flow(f).checkpoints_topic(f.source) for f in flows} & set(out.topics)
    tps = [TP(t, p) for t in sorted(heartbeats | checkpoints) for p in range(out.topics[t])]
    marks = admin.watermarks(tps)
    since = admin.offsets_for_times([tp for tp in tps if tp.topic in heartbeats], since_ms)
    ranges = {}
    for tp, w in marks.items():
        start = w.low if tp not in since else (since[tp] if since[tp] >= 0 else w.high)
        ranges[tp] = (max(start, w.low), w.high)
    return scan_target(read_ranges(clients.kafka_config(target), ranges, timeout_s=timeout_s),
                       heartbeats, checkpoints, out)


def read_source_groups(clients: Clients, source: str, regex: str) -> dict[str, dict[TP, int]]:
    """Committed offsets of the managed groups on a source cluster (one listing, all groups in flight together)."""
    admin = clients.admin(source)
    matches = group_matcher(regex)
    groups = sorted(g for g in admin.list_groups() if matches(g) and not INTERNAL_GROUPS.match(g))
    return admin.committed_offsets(groups)


def read_mirrored(clients: Clients, target: str, topics: set[str]) -> list[TargetTopic]:
    """Id, log start and end of each of `topics` on `target` (one DescribeTopics request and one watermark batch,
    for every flow into it); a topic the pass's listing does not hold is left out."""
    admin = clients.admin(target)
    counts = admin.topics()
    names = sorted(t for t in topics if t in counts)
    ids = admin.topic_ids(names)
    marks = admin.watermarks([TP(t, p) for t in names for p in range(counts[t])])
    return [TargetTopic(topic=t, topic_id=ids[t], partitions=[(marks[TP(t, p)].low, marks[TP(t, p)].high)
                                                             for p in range(counts[t])])
            for t in names if t in ids]
