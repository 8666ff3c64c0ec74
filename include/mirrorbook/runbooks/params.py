"""Runbook parameters: one pydantic model per runbook, validated before anything is called.

The DAG forms are built from the same models' choices, so what the UI offers and what the runbook
accepts cannot drift. Every error names the parameter and what would be accepted.
"""

from __future__ import annotations

import json
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
