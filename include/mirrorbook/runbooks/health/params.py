"""The health check's parameters: the form, its defaults and the flows it selects."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mirrorbook.mm2.flows import FlowState
from mirrorbook.runbooks.params import InvalidParams, _bool
from mirrorbook.topology import FlowSpec, Topology

FLOW_STATES = tuple(s.value for s in FlowState)


class HealthParams(BaseModel):
    """The health check's form (and the scheduled run's defaults)."""

    model_config = ConfigDict(extra="forbid")
    flows: str = Field(".*", description="whole-name regex of the flows to check")
    restart_failed: bool = False
    required_state: Literal["REPLICATING", "CONCERNING", "NOT_REPLICATING", "DISABLED"] = "REPLICATING"
    max_lag: int = Field(10_000, ge=0)
    max_heartbeat_age_s: float = Field(120.0, gt=0)
    max_checkpoint_age_s: float = Field(600.0, gt=0)
    restart_timeout_s: float = Field(60.0, gt=0)

    @field_validator("restart_failed", mode="before")
    @classmethod
    def _restart(cls, v: Any) -> Any:
        return _bool(v)

    @field_validator("flows", mode="before")
    @classmethod
    def _flows(cls, v: Any) -> Any:
        return ".*" if v is None or (isinstance(v, str) and not v.strip()) else v

    @property
    def heartbeat_lookback_s(self) -> float:
        return 2 * self.max_heartbeat_age_s

    def check(self, topology: Topology) -> None:
        self.select(topology)

    def select(self, topology: Topology) -> list[FlowSpec]:
        try:
            pattern = re.compile(self.flows)
        except re.error as exc:
            raise InvalidParams(f"`flows` is not a valid regular expression: {exc}")
        chosen = [f for f in topology.flows if pattern.fullmatch(f.name)]
        if not chosen:
            raise InvalidParams(f"`flows` {self.flows!r} matches no flow; the topology defines: "
                                f"{', '.join(topology.flow_names()) or 'none'}")
        return chosen
