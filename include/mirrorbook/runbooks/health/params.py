"""The health check's parameters: the form, its defaults and the flows it selects."""

from __future__ import annotations

from typing import get_args

from pydantic import Field

from mirrorbook.mm2.flows import FlowStateName
from mirrorbook.runbooks.params import FlowsSelection

FLOW_STATES = get_args(FlowStateName)


class HealthParams(FlowsSelection):
    """The health check's form (and the scheduled run's defaults)."""

    flows: str = Field(".*", title="Flows (regex)",
                       description="whole-name regex of the flows to check, e.g. A->B; default: all")
    restart_failed: bool = Field(False, title="Restart FAILED connectors/tasks",
                                 description="restart FAILED connectors and FAILED tasks (audited); paused or "
                                             "stopped connectors are never touched")
    required_state: FlowStateName = Field(
        "REPLICATING", title="Required state", description="the KIP-1144 state every checked flow must be in")
    max_lag: int = Field(10_000, ge=0, title="Max lag (records)", description="per partition")
    max_heartbeat_age_s: float = Field(120.0, gt=0, title="Max heartbeat age (s)")
    max_checkpoint_age_s: float = Field(600.0, gt=0, title="Max checkpoint staleness (s)",
                                        description="how long a group may stay committed past its newest "
                                                    "checkpoint")
    restart_timeout_s: float = Field(60.0, gt=0, le=600, title="Restart timeout (s)",
                                     description="how long a restarted connector may take to be RUNNING again")
    readiness: bool = Field(True, title="Keep readiness positions",
                            description="while the source is readable, prove and keep where every managed group "
                                        "would resume on the target: what an unplanned failover falls back on "
                                        "where MM2 wrote no checkpoint")

    @property
    def heartbeat_lookback_s(self) -> float:
        return 2 * self.max_heartbeat_age_s

