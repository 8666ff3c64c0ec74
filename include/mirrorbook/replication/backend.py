"""The replication-backend seam: what runbooks need from whatever replicates a flow.

Runbooks, the health check, the drill, the flows API, the Airflow sensors and triggers and the CLI reach
replication only through this protocol, so a second backend — broker-native Cluster Mirroring (KIP-1279:
`createClusterMirror`, `start/stop/pause/resumeMirrorTopics`, `describeClusterMirrors`,
`listClusterMirrors`, `deleteClusterMirror`) — is an addition, not a rewrite. MirrorMaker 2 on Kafka
Connect (`mirrorbook.replication.mm2_connect`) is the one implementation today; docs/backends.md maps each
runbook step to the calls of both.

A backend instance serves one flow; the flow's `backend` field (topology) names its kind. Mutations take
the runbook (`rb`) and go through its step engine, so they are planned in a dry run, audited with what
each call leaves in place (`replication.expect`), and snapshotted like every other change. The
dependency runs one way: runbooks -> replication -> connect / mm2 / kafka; nothing here imports a runbook
(the engine is the caller's, passed in).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Literal, Protocol, Sequence, runtime_checkable

from pydantic import BaseModel

from mirrorbook.kafka.types import TP
from mirrorbook.mm2.internal_topics import OffsetSyncsLocation

if TYPE_CHECKING:
    from mirrorbook.connect.models import ConnectorOffsets, ConnectorStatus, ConnectorView
    from mirrorbook.mm2.flows import FlowStatus
    from mirrorbook.core.engine import Runbook, StepOutcome
    from mirrorbook.topology import FlowSpec

FlowTarget = Literal["RUNNING", "PAUSED", "STOPPED"]
FlowAction = Literal["pause", "resume", "stop"]
# The runbook actions and the state each asks the backend for: the one map (its inverse names the steps).
ACTION_TARGET: dict[FlowAction, FlowTarget] = {"pause": "PAUSED", "resume": "RUNNING", "stop": "STOPPED"}
TARGET_ACTION: dict[FlowTarget, FlowAction] = {v: k for k, v in ACTION_TARGET.items()}
OffsetsAction = Literal["alter", "reset", "restore"]
# Called right after a change of the replication's own offsets was read back (part name, expected, found).
ReadBack = Callable[[str, dict[str, Any], dict[str, Any]], None]


class OffsetMapping(BaseModel):
    """How a group's offsets on the source are translated to the target's: from what the backend records —
    MM2's checkpoints (on the target) and offset-syncs (on the source or, with
    `offset-syncs.topic.location=target`, the target), emitted every `checkpoint_interval_s`.

    (A KIP-1279 backend would keep offsets — mirror topics are copies — and add a way to say so here; no
    backend does today, so there is nothing to branch on yet.)"""

    offset_syncs_location: OffsetSyncsLocation = "source"
    checkpoint_interval_s: int = 60
    # How the replication reads its source, so a proof reads it alike: MM2's consumer at the Java default
    # (read_uncommitted) copies the records of aborted transactions as plain records.
    source_isolation: Literal["read_committed", "read_uncommitted"] = "read_uncommitted"


@runtime_checkable
class ReplicationBackend(Protocol):
    kind: str
    flow: "FlowSpec"

    @property
    def place(self) -> str:
        """Where the flow's replication is managed, as messages name it (alias and URL, never credentials)."""

    # -- state -----------------------------------------------------------------------------------------
    def status(self, *, with_lag: bool = True, count_above: int = 0) -> "FlowStatus":
        """The flow's KIP-1144 state, its parts' states and (with_lag) per-partition replication lag in records
        (established by reading wherever the offsets lag exceeds `count_above`: a gate passes its max_lag)."""

    async def astatus(self, *, with_lag: bool = True, count_above: int = 0) -> "FlowStatus":
        """`status`, for triggers and concurrent passes."""

    def part_states(self, *, deadline_s: float = 5.0) -> "dict[str, ConnectorStatus | None]":
        """Each part as the backend shows it now, all read within `deadline_s` (None: no such part). Raises
        when the backend cannot be read: a caller must never take "unreadable" for a state."""

    async def adescribe_parts(self) -> "dict[str, ConnectorView | None]":
        """Each part's configuration and status as the backend holds them, unmasked (the caller masks)."""

    @property
    def parts(self) -> tuple[str, ...]:
        """The flow's parts by name, in the order a stop takes them."""

    def in_state(self, target: FlowTarget, *, parts: str = "all") -> bool:
        """Whether the flow (or the named part) shows `target` now — a sensor's poke."""

    def set_state(self, rb: "Runbook", target: FlowTarget, *, parts: str | Sequence[str] = "all", wait: bool = True,
                  timeout_s: float = 120.0) -> list["StepOutcome"]:
        """Move the flow (or the named part, or the parts named) to `target`; act only where it is not there yet;
        wait for it."""

    def wait_state(self, target: FlowTarget, *, parts: str = "all", timeout_s: float = 120.0) -> dict[str, str]:
        """Wait (no change made) until the flow or the named part shows `target`; its state per part."""

    async def await_state(self, target: FlowTarget, *, parts: str = "all", timeout_s: float = 120.0,
                          poll_s: float = 1.0) -> dict[str, str]:
        """`wait_state`, for the triggerer."""

    def group_writers(self) -> list[str]:
        """The parts that can write consumer groups' offsets on the target (what must be stopped before a
        failover's offsets are safe from being overwritten)."""

    # -- positions and offsets -------------------------------------------------------------------------
    def replicated_offsets(self) -> dict[TP, int]:
        """Per source partition, the last source offset the backend has replicated (readable with the source
        cluster down: MM2 keeps them in Connect)."""

    async def areplicated_offsets(self) -> dict[TP, int]:
        """`replicated_offsets`, for the RPO sampler's event loop."""

    def offset_mapping(self) -> OffsetMapping:
        """How group offsets translate from the source to the target."""

    def replicated_topics_filter(self) -> tuple[str, str]:
        """The backend's own (include, exclude) topic patterns, comma-separated regexes."""

    def own_offsets(self, part: str) -> "ConnectorOffsets":
        """The replication's own offsets (MM2: a connector's KIP-875 offsets)."""

    def change_own_offsets(self, rb: "Runbook", part: str, action: OffsetsAction, *,
                           requested: "ConnectorOffsets | None" = None, snapshot_id: str | None = None,
                           stop_first: bool = False, timeout_s: float = 120.0, effect: str | None = None,
                           on_read_back: ReadBack | None = None) -> "StepOutcome":
        """Alter, reset or restore them (the part must be stopped, or `stop_first`). `on_read_back` gets what
        was read back while the part was still stopped (the parity proof judges that moment)."""
