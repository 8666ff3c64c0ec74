"""The replication-backend seam: what runbooks need from whatever replicates a flow.

Runbooks, the health check, the drill, the flows API and the CLI reach replication only through this
protocol, so a second backend — broker-native Cluster Mirroring (KIP-1279: `createClusterMirror`,
`start/stop/pause/resumeMirrorTopics`, `describeClusterMirrors`, `listClusterMirrors`,
`deleteClusterMirror`) — is an addition, not a rewrite. MirrorMaker 2 on Kafka Connect
(`mirrorbook.replication.mm2_connect`) is the one implementation today; docs/backends.md maps each runbook
step to the calls of both.

A backend instance serves one flow. Mutations take the runbook (`rb`) and go through its step engine, so
they are planned in a dry run, audited, and snapshotted like every other change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from pydantic import BaseModel

from mirrorbook.kafka.types import TP

if TYPE_CHECKING:
    from mirrorbook.connect.models import ConnectorOffsets
    from mirrorbook.mm2.flows import FlowStatus
    from mirrorbook.runbooks.engine import Runbook, StepOutcome
    from mirrorbook.topology import FlowSpec

FlowTarget = Literal["RUNNING", "PAUSED", "STOPPED"]
OffsetsAction = Literal["alter", "reset", "restore"]


class OffsetMapping(BaseModel):
    """How a group's offsets on the source relate to the target's.

    `identity`: the target keeps the source's offsets (KIP-1279 mirror topics) — nothing to translate.
    Otherwise they are translated from what the backend records: MM2's checkpoints (on the target) and
    offset-syncs (on the source or, with `offset-syncs.topic.location=target`, the target).
    """

    identity: bool = False
    offset_syncs_location: Literal["source", "target"] = "source"
    checkpoint_interval_s: int = 60


@runtime_checkable
class ReplicationBackend(Protocol):
    kind: str
    flow: "FlowSpec"

    def status(self, *, with_lag: bool = True) -> "FlowStatus":
        """The flow's KIP-1144 state, its parts' states and (with_lag) per-partition replication lag."""

    async def astatus(self, *, with_lag: bool = True) -> "FlowStatus":
        """`status`, for triggers and concurrent passes."""

    def set_state(self, rb: "Runbook", target: FlowTarget, *, parts: str = "all", wait: bool = True,
                  timeout_s: float = 120.0) -> list["StepOutcome"]:
        """Move the flow (or the named part) to `target`; act only where it is not there yet; wait for it."""

    def wait_state(self, target: FlowTarget, *, parts: str = "all", timeout_s: float = 120.0) -> dict[str, str]:
        """Wait (no change made) until the flow or the named part shows `target`; its state per part."""

    def group_writers(self) -> list[str]:
        """The parts that can write consumer groups' offsets on the target (what must be stopped before a
        failover's offsets are safe from being overwritten)."""

    def replicated_offsets(self) -> dict[TP, int]:
        """Per source partition, the last source offset the backend has replicated (readable with the source
        cluster down: MM2 keeps them in Connect)."""

    def offset_mapping(self) -> OffsetMapping:
        """How group offsets translate from the source to the target."""

    def replicated_topics_filter(self) -> tuple[str, str]:
        """The backend's own (include, exclude) topic patterns, comma-separated regexes."""

    def own_offsets(self, part: str) -> "ConnectorOffsets":
        """The replication's own offsets (MM2: a connector's KIP-875 offsets)."""

    def change_own_offsets(self, rb: "Runbook", part: str, action: OffsetsAction, *,
                           requested: "ConnectorOffsets | None" = None, snapshot_id: str | None = None,
                           stop_first: bool = False, timeout_s: float = 120.0,
                           effect: str | None = None) -> "StepOutcome":
        """Alter, reset or restore them (the part must be stopped, or `stop_first`)."""
