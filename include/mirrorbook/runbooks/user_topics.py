"""Which topics hold user records: not Kafka's (`__*`), MM2's (heartbeats, checkpoints, offset-syncs), Connect's
storage topics, nor mirrorbook's audit anchors. Losses, lag and RPO figures count user records only."""

from __future__ import annotations

from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.runbooks.anchors import TOPIC as ANCHORS_TOPIC


def record_kind(policy: ReplicationPolicy, topic: str) -> str | None:
    """Why `topic` holds no user records (Kafka's, MM2's, Connect's, mirrorbook's audit anchors), or None."""
    return policy.non_user_kind(topic) or (
        "mirrorbook" if ANCHORS_TOPIC in (topic, policy.upstream_topic(topic)) else None)
