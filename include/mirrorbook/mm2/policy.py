"""MM2 replication policies (DefaultReplicationPolicy, IdentityReplicationPolicy), as Kafka implements them.

Topic naming drives everything downstream: which target topic mirrors which source topic, where
checkpoints and offset-syncs live, and how many hops a heartbeat travelled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

HEARTBEATS = "heartbeats"
OFFSET_SYNCS_PREFIX = "mm2-offset-syncs"
# Kafka Connect's storage topics as usually named: `connect-configs|offsets|status` (Kafka's sample worker
# config), Strimzi's `connect-cluster-*`, the devstack's `connect-configs-A.internal`. MM2 4.x no longer
# counts `.internal` topics as internal (its default topics.exclude is `mm2.*\.internal`), so a flow
# with `topics=.*` mirrors a worker's storage topics like user data.
CONNECT_STORAGE_TOPIC = re.compile(r"connect-(?:cluster-)?(?:configs|offsets|status)(?:[-.].*)?")
NonUserKind = Literal["kafka", "mm2", "connect"]


def _java_split(text: str, sep: str) -> list[str]:
    """`String.split(Pattern.quote(sep))`: trailing empty strings are dropped."""
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


@dataclass(frozen=True)
class ReplicationPolicy:
    """DefaultReplicationPolicy (`identity=False`) or IdentityReplicationPolicy (`identity=True`).

    For identity, `source_alias` is the flow's source cluster alias (Kafka's `source.cluster.alias`).
    `internal_separator` mirrors `replication.policy.internal.topic.separator.enabled` (default true).
    """

    separator: str = "."
    identity: bool = False
    source_alias: str | None = None
    internal_separator: bool = True

    @classmethod
    def for_flow(cls, flow: "object") -> "ReplicationPolicy":
        return cls(separator=getattr(flow, "separator", "."),
                   identity=getattr(flow, "replication_policy", "default") == "identity",
                   source_alias=getattr(flow, "source", None))

    # -- DefaultReplicationPolicy -------------------------------------------------------------------
    def _default_format(self, source_alias: str, topic: str) -> str:
        return f"{source_alias}{self.separator}{topic}"

    def _default_source(self, topic: str) -> str | None:
        parts = _java_split(topic, self.separator)
        return parts[0] if len(parts) >= 2 else None

    def _default_upstream(self, topic: str) -> str | None:
        source = self._default_source(topic)
        return None if source is None else topic[len(source) + len(self.separator):]

    # -- the policy ---------------------------------------------------------------------------------
    def _looks_like_heartbeat(self, topic: str) -> bool:
        return topic.endswith(HEARTBEATS)

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        if self.identity and not self._looks_like_heartbeat(topic):
            return topic
        return self._default_format(source_alias, topic)

    def topic_source(self, topic: str) -> str | None:
        if self.identity and not self._looks_like_heartbeat(topic):
            return self.source_alias
        return self._default_source(topic)

    def upstream_topic(self, topic: str) -> str | None:
        if self.identity and not self._looks_like_heartbeat(topic):
            return topic
        return self._default_upstream(topic)

    def original_topic(self, topic: str) -> str:
        upstream = self.upstream_topic(topic)
        if upstream is None or upstream == topic:
            return topic
        return self.original_topic(upstream)

    def _internal_suffix(self) -> str:
        return f"{self.separator}internal" if self.internal_separator else ".internal"

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        sep = self.separator if self.internal_separator else "."
        return f"{OFFSET_SYNCS_PREFIX}{sep}{cluster_alias}{self._internal_suffix()}"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        sep = self.separator if self.internal_separator else "."
        return f"{cluster_alias}{sep}checkpoints{self._internal_suffix()}"

    def is_heartbeats_topic(self, topic: str) -> bool:
        return self.original_topic(topic) == HEARTBEATS

    def is_checkpoints_topic(self, topic: str) -> bool:
        sep = self.separator if self.internal_separator else "."
        return topic.endswith(f"{sep}checkpoints{self._internal_suffix()}") or topic.endswith(".checkpoints.internal")

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return (topic.startswith(OFFSET_SYNCS_PREFIX) and topic.endswith(self._internal_suffix())) \
            or self.is_checkpoints_topic(topic)

    def is_internal_topic(self, topic: str) -> bool:
        return (self.is_mm2_internal_topic(topic) or topic.startswith("__") or topic.startswith(".")
                or topic.endswith("-internal") or topic.endswith(".internal"))

    def non_user_kind(self, topic: str) -> NonUserKind | None:
        """Why `topic` holds no user records, or None if it does: Kafka's own (`__`/`.`-prefixed), MM2's
        (offset-syncs, checkpoints, heartbeats) or Kafka Connect's storage topics by their usual names
        (neither Connect's REST API nor the topology says what a worker named them). A remote copy
        (`A.connect-offsets`) counts as its original."""
        name: str | None = topic
        while name:  # the topic, then each upstream name (the default policy reads `x.internal` as a remote `internal`)
            if name.startswith("__") or name.startswith("."):
                return "kafka"
            if self.is_mm2_internal_topic(name) or name == HEARTBEATS:
                return "mm2"
            if CONNECT_STORAGE_TOPIC.fullmatch(name):
                return "connect"
            upstream = self.upstream_topic(name)
            name = upstream if upstream != name else None
        return None

    def source_topic_of(self, remote: str, source_alias: str) -> str | None:
        """The source topic a target topic mirrors from `source_alias`, or None if it is not one of its."""
        if self.identity:
            return remote if not self._looks_like_heartbeat(remote) else self._default_upstream(remote)
        return self._default_upstream(remote) if self._default_source(remote) == source_alias else None
