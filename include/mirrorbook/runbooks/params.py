"""Runbook parameters: one pydantic model per runbook, validated before anything is called.

The DAG forms are built from the same models' choices, so what the UI offers and what the runbook
accepts cannot drift. Every error names the parameter and what would be accepted.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from mirrorbook.connect.models import ConnectorOffsets
from mirrorbook.errors import Refused
from mirrorbook.mm2.offsets import validate_offsets
from mirrorbook.topology import FlowSpec, Topology

Role = Literal["source", "checkpoint", "heartbeat"]
PAUSE_RESUME_ACTIONS = ("pause", "resume", "stop")
CONNECTOR_SELECTIONS = ("all", "source", "checkpoint", "heartbeat")
OFFSETS_ACTIONS = ("list", "alter", "reset", "restore")
FAILOVER_MODES = ("planned", "unplanned")
TRANSLATIONS = ("precise", "mm2")


class InvalidParams(Refused):
    pass


def _bool(v: Any) -> Any:
    if isinstance(v, str):
        low = v.strip().lower()
        if low in ("true", "1", "yes"):
            return True
        if low in ("false", "0", "no", ""):
            return False
    return v


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
    flow: str
    dry_run: bool = False

    _flow_spec: FlowSpec | None = None

    @field_validator("dry_run", mode="before")
    @classmethod
    def _dry(cls, v: Any) -> Any:
        return _bool(v)

    @property
    def flow_spec(self) -> FlowSpec:
        assert self._flow_spec is not None, "validated against a topology first"
        return self._flow_spec

    def check(self, topology: Topology) -> None:
        self._flow_spec = topology.flow(self.flow)


class PauseResumeParams(_Params):
    action: Literal["pause", "resume", "stop"]
    connectors: Literal["all", "source", "checkpoint", "heartbeat"] = "all"

    @property
    def target(self) -> str:
        return {"pause": "PAUSED", "resume": "RUNNING", "stop": "STOPPED"}[self.action]


class OffsetsParams(_Params):
    connector: Role = "source"
    action: Literal["list", "alter", "reset", "restore"] = "list"
    offsets: Any = None
    stop_first: bool = False
    snapshot_id: str | None = None

    _parsed: ConnectorOffsets | None = None

    @field_validator("stop_first", mode="before")
    @classmethod
    def _stop(cls, v: Any) -> Any:
        return _bool(v)

    @field_validator("snapshot_id", mode="before")
    @classmethod
    def _blank(cls, v: Any) -> Any:
        return None if isinstance(v, str) and not v.strip() else v

    @property
    def parsed_offsets(self) -> ConnectorOffsets | None:
        return self._parsed

    def check(self, topology: Topology) -> None:
        super().check(topology)
        if self.action == "alter":
            if self.offsets in (None, "", {}):
                raise InvalidParams("action=alter needs `offsets`: a KIP-875 body "
                                    '{"offsets": [{"partition": {...}, "offset": {"offset": N}}]}',
                                    "list the current offsets first (action=list) and edit that JSON")
            self._parsed = validate_offsets(self.connector, self.offsets, self.flow_spec)
        elif self.offsets not in (None, "", {}):
            raise InvalidParams(f"`offsets` is only used by action=alter, not action={self.action}")
        if self.action == "restore" and not self.snapshot_id:
            raise InvalidParams("action=restore needs `snapshot_id` (the snapshot taken before a change)",
                                "find it with `mirrorbook audit snapshots --flow <flow>`")


class _MoveGroupsParams(_Params):
    """What failover and failback share: how groups are chosen, translated and gated."""

    mode: Literal["planned", "unplanned"] = "planned"
    groups: str | None = None  # regex; default: the topology's managed groups for the flow
    translation: Literal["mm2", "precise"] = "precise"
    drain_timeout: int = 600
    max_lag: int = 0

    @field_validator("groups", mode="before")
    @classmethod
    def _groups(cls, v: Any) -> Any:
        return None if isinstance(v, str) and not v.strip() else v

    @field_validator("drain_timeout", "max_lag")
    @classmethod
    def _non_negative(cls, v: int) -> int:
        if v < 0:
            raise ValueError("must be >= 0")
        return v

    def groups_regex(self, topology: Topology) -> str:
        return self.groups or topology.managed_groups(self.flow_spec)

    def check(self, topology: Topology) -> None:
        super().check(topology)
        try:
            re.compile(self.groups_regex(topology))
        except re.error as exc:
            raise InvalidParams(f"`groups` is not a valid regular expression: {exc}")
        if self.mode == "unplanned" and self.translation == "precise":
            raise InvalidParams("translation=precise reads records on the cluster being left, which an unplanned "
                                "move cannot rely on", "use translation=mm2 with mode=unplanned")


class FailoverParams(_MoveGroupsParams):
    """mm2_failover: move the flow's managed consumer groups from its source to its target."""

    start_reverse_flow: bool = False

    @field_validator("start_reverse_flow", mode="before")
    @classmethod
    def _rev(cls, v: Any) -> Any:
        return _bool(v)

    def check(self, topology: Topology) -> None:
        super().check(topology)
        if self.start_reverse_flow and topology.reverse_of(self.flow_spec) is None:
            raise InvalidParams(f"start_reverse_flow: the topology has no reverse flow "
                                f"{self.flow_spec.target}->{self.flow_spec.source}")


class FailbackParams(_MoveGroupsParams):
    """mm2_failback: `flow` is the flow that was failed over (e.g. A->B); its groups move back from its
    target to its source, through the reverse flow (B->A), which is stopped afterwards."""

    restart_flow: bool = True  # resume the original flow (A->B) once the groups are back

    @field_validator("restart_flow", mode="before")
    @classmethod
    def _restart(cls, v: Any) -> Any:
        return _bool(v)

    def check(self, topology: Topology) -> None:
        super().check(topology)
        if topology.reverse_of(self.flow_spec) is None:
            raise InvalidParams(f"failback of {self.flow} needs the reverse flow {self.flow_spec.target}->"
                                f"{self.flow_spec.source} in the topology")


def parse(model: type[_Params], raw: dict[str, Any], topology: Topology) -> Any:
    """Validate `raw` (DAG params or CLI args) into `model`, checked against the topology."""
    try:
        params = model.model_validate({k: v for k, v in raw.items() if k in model.model_fields})
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "params"
        allowed = _allowed(model, field)
        raise InvalidParams(f"Invalid parameter `{field}`: {first['msg']}"
                            + (f" (got {json.dumps(first.get('input'), default=str)})" if "input" in first else ""),
                            f"accepted values: {allowed}" if allowed else None)
    params.check(topology)
    return params


def _allowed(model: type[_Params], field: str) -> str | None:
    info = model.model_fields.get(field)
    if info is None:
        return None
    args = getattr(info.annotation, "__args__", None)
    if args and all(isinstance(a, str) for a in args):
        return ", ".join(args)
    return None
