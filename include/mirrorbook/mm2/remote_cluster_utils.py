"""Kafka's RemoteClusterUtils / MirrorClient in Python, plus the one-pass translation of many groups.

Topic-name logic (`count_hops_for_topic`, `all_sources`, heartbeat/checkpoint/remote topic tests)
follows MirrorClient line by line and takes its naming rules from `ReplicationPolicy`, so Default
and Identity policies behave as in Kafka. `translate_offsets` keeps Kafka's per-group semantics
(read the whole checkpoints topic, the last checkpoint per partition of that group wins);
`translate_offsets_all` gives every matching group the same answer from a single read.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.internal_topics import Config, read_checkpoints
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.patterns import whole_id_matcher

_DEFAULT_POLICY = ReplicationPolicy()
AdminLike = KafkaAdmin | str | Mapping[str, Any]


def _admin(admin: AdminLike) -> KafkaAdmin:
    return admin if isinstance(admin, KafkaAdmin) else KafkaAdmin(admin)


def _list_topics(admin: AdminLike) -> set[str]:
    """Like Admin.listTopics(): user topics only (internal `__*` topics are not listed)."""
    return set(_admin(admin).topics())


# -- naming logic (MirrorClient) ------------------------------------------------------------------

def count_hops_for_topic(topic: str, source_alias: str, policy: ReplicationPolicy | None = None) -> int:
    """Hops from `source_alias` encoded in `topic`'s name; -1 if it does not come from there (or cycles)."""
    policy = policy or _DEFAULT_POLICY
    hops = 0
    visited: set[str] = set()
    current: str | None = topic
    while current is not None:
        hops += 1
        source = policy.topic_source(current)
        if source is None:
            return -1
        if source == source_alias:
            return hops
        if source in visited:  # IdentityReplicationPolicy and the like cannot prevent cycles
            return -1
        visited.add(source)
        current = policy.upstream_topic(current)
    return -1


def all_sources(topic: str, policy: ReplicationPolicy | None = None) -> set[str]:
    """Every cluster alias a topic passed through, e.g. {"B", "A"} for `B.A.heartbeats`."""
    policy = policy or _DEFAULT_POLICY
    sources: set[str] = set()
    source = policy.topic_source(topic)
    current: str | None = topic
    while source is not None and source not in sources:
        sources.add(source)
        current = policy.upstream_topic(current) if current is not None else None
        source = policy.topic_source(current) if current is not None else None
    return sources


def is_heartbeat_topic(topic: str, policy: ReplicationPolicy | None = None) -> bool:
    return (policy or _DEFAULT_POLICY).is_heartbeats_topic(topic)


def is_checkpoint_topic(topic: str, policy: ReplicationPolicy | None = None) -> bool:
    return (policy or _DEFAULT_POLICY).is_checkpoints_topic(topic)


def is_remote_topic(topic: str, policy: ReplicationPolicy | None = None) -> bool:
    policy = policy or _DEFAULT_POLICY
    return not policy.is_internal_topic(topic) and policy.topic_source(topic) is not None


# -- cluster queries (RemoteClusterUtils) ---------------------------------------------------------

def heartbeat_topics(admin: AdminLike, policy: ReplicationPolicy | None = None) -> set[str]:
    return {t for t in _list_topics(admin) if is_heartbeat_topic(t, policy)}


def checkpoint_topics(admin: AdminLike, policy: ReplicationPolicy | None = None) -> set[str]:
    return {t for t in _list_topics(admin) if is_checkpoint_topic(t, policy)}


def upstream_clusters(admin: AdminLike, policy: ReplicationPolicy | None = None) -> set[str]:
    """Clusters (possibly several hops away) whose heartbeats reach this one."""
    return {s for t in heartbeat_topics(admin, policy) for s in all_sources(t, policy)}


def replication_hops(admin: AdminLike, upstream_alias: str, policy: ReplicationPolicy | None = None) -> int:
    """Fewest hops from `upstream_alias` to this cluster by its heartbeat topics; -1 if unreachable."""
    hops = [h for t in heartbeat_topics(admin, policy) if (h := count_hops_for_topic(t, upstream_alias, policy)) != -1]
    return min(hops, default=-1)


# -- offset translation ---------------------------------------------------------------------------

def group_matcher(groups_regex: str) -> Callable[[str], bool]:
    """Java `Pattern.matches` semantics (the whole id must match), like MM2's `groups` setting; linear time."""
    return whole_id_matcher(groups_regex, "groups")


def translate_offsets(config: Config, source_alias: str, group: str, *, policy: ReplicationPolicy | None = None,
                      timeout_s: float = 60.0) -> dict[TP, int]:
    """Kafka's `RemoteClusterUtils.translateOffsets`: target partition → downstream offset for one group.

    `config` is the target cluster (where `<source_alias>.checkpoints.internal` lives). Reads the
    whole topic for this one group, exactly like Kafka — use `translate_offsets_all` for many groups.
    """
    log = read_checkpoints(config, source_alias, policy=policy, group_filter=group.__eq__, timeout_s=timeout_s)
    return log.offsets().get(group, {})


def translate_offsets_all(config: Config, source_alias: str, groups_regex: str = ".*", *,
                          policy: ReplicationPolicy | None = None, timeout_s: float = 60.0) -> dict[str, dict[TP, int]]:
    """`translate_offsets` for every group matching `groups_regex`, from ONE read of the checkpoints topic.

    For each matching group g: `result.get(g, {}) == translate_offsets(config, source_alias, g)`
    (groups without any checkpoint are absent, where the per-group call returns {}).
    """
    log = read_checkpoints(config, source_alias, policy=policy, group_filter=group_matcher(groups_regex),
                           timeout_s=timeout_s)
    return log.offsets()
