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
    """Every data partition within `max_lag`; never while the flow's connectors (their offsets) cannot be read:
    a lag not known is no lag of 0."""
    if status.unreadable is not None:
        return False, {}
    lag = drain_lag(status, topics)
    behind = {tp: n for tp, n in lag.items() if n > max_lag}
    return not behind, behind


def not_drained(status: FlowStatus, behind: dict[TP, int], max_lag: int, within_s: float) -> str:
    """Why a drain gate did not open, the cause first: what refused (or did not answer) when the flow could not
    be read, else the partitions still behind."""
    if status.unreadable is not None:
        return (f"{status.unreadable.cause}; so replication of {status.flow} could not be seen draining within "
                f"{within_s:.0f}s (flow state {status.state.value})")
    return (f"replication of {status.flow} not drained within {within_s:.0f}s (max_lag={max_lag}); behind: "
            f"{describe_behind(behind) or 'none'}; flow state {status.state.value}")


def active_groups(admin: KafkaAdmin, groups: list[str]) -> dict[str, GroupInfo]:
    """Groups that still have members (or are rebalancing) — they must be stopped before a cutover."""
    return {g: i for g, i in admin.group_states(groups).items() if not i.inactive}


def describe_behind(behind: dict[TP, int], limit: int = 8) -> str:
    items = sorted(behind.items(), key=lambda kv: -kv[1])
    text = ", ".join(f"{tp}: {n}" for tp, n in items[:limit])
    return text + (f" (+{len(items) - limit} more)" if len(items) > limit else "")
