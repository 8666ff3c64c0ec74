"""Read-only checks the failover gates wait on: replication drained, consumer groups inactive."""

from __future__ import annotations

from mirrorbook.kafka.admin import GroupInfo, KafkaAdmin
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.flows import FlowStatus
from mirrorbook.mm2.policy import ReplicationPolicy


def drain_lag(status: FlowStatus, topics: set[str] | None = None) -> dict[TP, int]:
    """Per-partition replication lag of the flow's data topics (heartbeats never drain: excluded)."""
    policy = ReplicationPolicy()
    return {TP(p.topic, p.partition): p.lag for p in status.lag
            if not policy.is_heartbeats_topic(p.topic) and (topics is None or p.topic in topics)}


def drained(status: FlowStatus, max_lag: int, topics: set[str] | None = None) -> tuple[bool, dict[TP, int]]:
    lag = drain_lag(status, topics)
    behind = {tp: n for tp, n in lag.items() if n > max_lag}
    return not behind, behind


def active_groups(admin: KafkaAdmin, groups: list[str]) -> dict[str, GroupInfo]:
    """Groups that still have members (or are rebalancing) — they must be stopped before a cutover."""
    return {g: i for g, i in admin.describe_groups(groups).items() if not i.inactive}


def describe_behind(behind: dict[TP, int], limit: int = 8) -> str:
    items = sorted(behind.items(), key=lambda kv: -kv[1])
    text = ", ".join(f"{tp}: {n}" for tp, n in items[:limit])
    return text + (f" (+{len(items) - limit} more)" if len(items) > limit else "")
