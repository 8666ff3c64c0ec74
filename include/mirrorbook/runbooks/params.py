"""Runbook parameters: one pydantic model per runbook, the boundary every way in passes.

DAG params (the trigger form or the REST API's `conf`), the plugin's API and the CLI all go through
`parse`, before anything is called:
1. sizes first (`mirrorbook.bounds`): a 1 MB string or a body nested 100,000 levels deep is refused,
   naming the parameter and the limit, before any parser or regex engine sees it;
2. every key must be one the runbook knows — a misspelled `dryrun` is refused with "did you mean
   'dry_run'?", never ignored (ignoring it once turned a dry run into a real pause);
3. the model validates types, choices and bounds; 4. `check` validates against the topology.
Every value echoed in a message is bounded (`shown`). The DAG forms are generated from these same
models (mirrorbook.airflow.forms), so what the UI offers and what the runbook accepts cannot drift.
`preflight` holds the checks that need the audit store or a cluster (run once, by validate_params).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Mapping, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from mirrorbook.audit.errors import SnapshotNotFound
from mirrorbook.bounds import OFFSETS_LIMITS, PARAM_LIMITS, Limits, shown, unknown_keys
from mirrorbook.connect.models import ConnectorOffsets
from mirrorbook.errors import Refused
from mirrorbook.mm2 import Translation
from mirrorbook.mm2.offsets import validate_offsets
from mirrorbook.patterns import compile_whole_id, reason, whole_id_matcher
from mirrorbook.replication.backend import FlowAction
from mirrorbook.topology import CONNECTOR_CLASSES, ConnectorRole, FlowSpec, Topology

MAX_WAIT_S = 86_400  # the longest gate wait a form accepts (a day); task timeouts are derived from it


class InvalidParams(Refused):
    pass


class Preflight(Protocol):
    """What `preflight` may consult: the audit store and the clusters (read-only), and the topology."""

    audit: Any
    clients: Any
    topology: Topology


class FormParams(BaseModel):
    """A runbook's form. Field order is the form's order; titles and descriptions are the form's."""

    # Messages never carry the raw input (it may be huge): `parse` echoes it bounded.
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)
    # Per-field size limits where a field needs more room than PARAM_LIMITS gives.
    limits: ClassVar[dict[str, Limits]] = {}

    def check(self, topology: Topology) -> None:
        """Checks against the topology (cheap: every task runs them)."""

    def preflight(self, context: Preflight) -> list[str]:
        """Checks that need the audit store or a cluster, run once before anything changes.
        Raises InvalidParams for what makes the run impossible; returns warnings for the plan."""
        return []


F = TypeVar("F", bound=FormParams)


class FlowsSelection(FormParams):
    """A runbook over many flows: its model declares `flows` (a regex of whole flow names, blank: every flow)."""

    flows: str

    @field_validator("flows", mode="before")
    @classmethod
    def _flows(cls, v: Any) -> Any:
        return ".*" if v is None or (isinstance(v, str) and not v.strip()) else v

    def check(self, topology: Topology) -> None:
        self.select(topology)

    def select(self, topology: Topology) -> list[FlowSpec]:
        matches = whole_id_matcher(self.flows, "flows")
        chosen = [f for f in topology.flows if matches(f.name)]
        if not chosen:
            raise InvalidParams(f"`flows` {shown(self.flows)} matches no flow; the topology defines: "
                                f"{', '.join(topology.flow_names()) or 'none'}")
        return chosen


class FlowParams(FormParams):
    flow: str = Field(title="Flow", description="The replication flow, SOURCE->TARGET")

    _flow_spec: FlowSpec | None = None

    @property
    def flow_spec(self) -> FlowSpec:
        assert self._flow_spec is not None, "validated against a topology first"
        return self._flow_spec

    def check(self, topology: Topology) -> None:
        self._flow_spec = topology.flow(self.flow)


class ChangeParams(FlowParams):
    """A runbook that changes something: it can be dry-run (the form shows this right after the flow)."""

    dry_run: bool = Field(False, title="Dry run",
                          description="Only show the plan — every call it would make, with the precondition it "
                                      "checked — and change nothing")


ApprovalChoice = Literal["default", "required", "skip"]
# Last in each form that has it (like parity): the runbook's own fields come first.
APPROVAL_FIELD: ApprovalChoice = Field(
    "default", title="Approval",
    description="required: wait for a human to approve the plan (Required Actions) before anything changes; skip: go "
                "on without asking; default: what the topology's `approval` says for this runbook (required unless "
                "set). A dry run never waits",
    json_schema_extra={"values_display": {"default": "as the topology says", "required": "required", "skip": "skip"}})


class ApprovedParams(ChangeParams):
    """A runbook whose plan a human approves before its first mutation (runbooks/approval.py); each subclass
    declares `approval: ApprovalChoice = APPROVAL_FIELD` last in its form.

    The form's default is `default`: "what the topology's `approval` says for this runbook", resolved when
    the run is validated — not the topology's value copied into the form when the DAG file was parsed, which
    would go stale when the topology changes and would make an API trigger that omits `approval` follow
    whatever the DAG processor last read rather than the topology the run is checked against."""

    approval_runbook: ClassVar[str]
    if TYPE_CHECKING:
        approval: ApprovalChoice

    _approval: tuple[str, str] | None = None

    @property
    def approval_decision(self) -> tuple[str, str]:
        """("required" | "skip", why): the policy this run follows and where it came from."""
        assert self._approval is not None, "validated against a topology first"
        return self._approval

    def changes_nothing(self) -> str | None:
        """Why this run has nothing to approve whatever it is asked (a read-only action), if so."""
        return None

    def check(self, topology: Topology) -> None:
        super().check(topology)
        if self.dry_run:
            self._approval = ("skip", "a dry run changes nothing, so it never waits for approval")
        elif reason := self.changes_nothing():
            self._approval = ("skip", reason)
        elif self.approval == "default":
            mode = topology.approval.of(self.approval_runbook)
            self._approval = (mode, f"the topology's approval.{self.approval_runbook} is {mode}")
        else:
            self._approval = (self.approval, f"the run's approval parameter is {self.approval}")


Parity = Literal["spark", "off"]
PARITY_FIELD: Parity = Field("spark", title="Parity proof",
                             description="spark: after each change, a Spark job proves where offsets (and records) "
                                         "are; off: only the step's own read-back")


SPARK_CONNECT_FIELD = Field(None, title="Spark Connect connection",
                            description="the Airflow connection (type spark_connect) whose server runs this run's "
                                        "proofs; blank: the topology's `spark_connect_connection_id`, else "
                                        "spark_connect_default when it exists, else spark-submit",
                            max_length=250, pattern=r"^[A-Za-z0-9_.\-]*$")


def _blank_to_none(v: Any) -> Any:
    return None if isinstance(v, str) and not v.strip() else v


class PauseResumeParams(ChangeParams):
    """mm2_pause_resume: pause, resume or stop a flow's connectors."""

    action: FlowAction = Field(
        "pause", title="Action",
        description="pause: tasks stay assigned, paused; resume: back to RUNNING; stop: no tasks at all "
                    "(required before offsets can be changed)")
    connectors: Literal["all", ConnectorRole] = Field(
        "all", title="Connectors", description="all three of the flow's connectors, or only one of them",
        json_schema_extra={"values_display": {"all": "all three", **CONNECTOR_CLASSES}})
    parity: Parity = PARITY_FIELD
    spark_connect: str | None = SPARK_CONNECT_FIELD


OFFSETS_EFFECTS = {
    "source": "the MirrorSourceConnector resumes each partition after its offset: a LOWER offset re-copies records "
              "already on the target (duplicates there), a HIGHER one never copies the records in between; a reset "
              "re-copies every retained record from the start (duplicates on the target)",
    "checkpoint": "the MirrorCheckpointConnector's offsets are only bookkeeping (always 0): a reset makes it "
                  "re-emit checkpoints; consumer groups are not moved",
    "heartbeat": "the MirrorHeartbeatConnector's offsets are only bookkeeping (always 0): harmless",
}


class OffsetsParams(ApprovedParams):
    """mm2_offsets: list, alter, reset or restore one of a flow's connectors' offsets (Strimzi proposal 083)."""

    approval_runbook: ClassVar[str] = "offsets"
    limits: ClassVar[dict[str, Limits]] = {"offsets": OFFSETS_LIMITS}

    connector: ConnectorRole = Field("source", title="Connector", description="which of the flow's MM2 connectors",
                                     json_schema_extra={"values_display": {**CONNECTOR_CLASSES}})
    action: Literal["list", "alter", "reset", "restore"] = Field(
        "list", title="Action",
        description="list: read and keep them (a snapshot you can restore); alter: apply `offsets`; reset: delete "
                    "them; restore: re-apply a snapshot. What a change does to replication: "
                    + "; ".join(f"{role} — {text}" for role, text in OFFSETS_EFFECTS.items()))
    offsets: dict[str, Any] | str | None = Field(
        None, title="Offsets (alter)",
        description='KIP-875 body for alter: {"offsets": [{"partition": {...}, "offset": {"offset": N}}]}')
    stop_first: bool = Field(False, title="Stop first",
                             description="stop the connector for the change, then restore its previous state")
    snapshot_id: str | None = Field(None, title="Snapshot id (restore)",
                                    description="the snapshot to re-apply, from `mirrorbook audit snapshots`")
    parity: Parity = PARITY_FIELD
    spark_connect: str | None = SPARK_CONNECT_FIELD
    approval: ApprovalChoice = APPROVAL_FIELD

    _parsed: ConnectorOffsets | None = None

    @field_validator("snapshot_id", "offsets", mode="before")
    @classmethod
    def _blank(cls, v: Any) -> Any:
        return _blank_to_none(v)

    @property
    def parsed_offsets(self) -> ConnectorOffsets | None:
        """The validated KIP-875 body of an alter (parsed once, by `check`)."""
        return self._parsed

    @property
    def effect(self) -> str:
        return OFFSETS_EFFECTS[self.connector]

    def changes_nothing(self) -> str | None:
        return "action=list only reads the offsets" if self.action == "list" else None

    def check(self, topology: Topology) -> None:
        super().check(topology)
        if self.action == "alter":
            if self.offsets in (None, {}):
                raise InvalidParams("action=alter needs `offsets`: a KIP-875 body "
                                    '{"offsets": [{"partition": {...}, "offset": {"offset": N}}]}',
                                    "list the current offsets first (action=list) and edit that JSON")
            self._parsed = validate_offsets(self.connector, self.offsets, self.flow_spec)
        elif self.offsets is not None:
            raise InvalidParams(f"`offsets` is only used by action=alter, not action={self.action}")
        if self.action == "restore" and not self.snapshot_id:
            raise InvalidParams("action=restore needs `snapshot_id` (the snapshot taken before a change)",
                                "find it with `mirrorbook audit snapshots --flow <flow>`")
        if self.action != "restore" and self.snapshot_id:
            raise InvalidParams(f"`snapshot_id` is only used by action=restore, not action={self.action}")

    def preflight(self, context: Preflight) -> list[str]:
        if self.action == "restore":
            check_snapshot(context.audit, self.flow_spec, self.flow_spec.connector(self.connector), self.snapshot_id)
        return []


SNAPSHOT_KIND = "connector-offsets"


def check_snapshot(audit: Any, flow: FlowSpec, connector: str, snapshot_id: str | None) -> None:
    """The snapshot exists and holds this connector's offsets; otherwise name the flow's latest ones."""
    mine = [s for s in audit.snapshots(flow=flow.name, kind=SNAPSHOT_KIND) if s.subject == connector]
    latest = ", ".join(f"{s.snapshot_id} ({s.note or s.kind}, {s.created_at:%Y-%m-%d %H:%M:%S})"
                       for s in reversed(mine[-5:])) or "none"
    try:
        snap = audit.snapshot(snapshot_id)
    except SnapshotNotFound:
        raise InvalidParams(f"No snapshot {shown(snapshot_id)} in the audit store; the latest snapshots of "
                            f"{connector} are: {latest}", "mirrorbook audit snapshots --flow " + flow.name) from None
    if snap.kind != SNAPSHOT_KIND or snap.subject != connector:
        raise InvalidParams(f"Snapshot {shown(snapshot_id)} holds {snap.kind} of {shown(snap.subject)}, not the "
                            f"offsets of connector {connector}; its latest snapshots are: {latest}")


Mode = Literal["planned", "unplanned"]


class MoveParams(ApprovedParams):
    """What failover and failback share: how groups are chosen, translated and gated."""

    mode: Mode = Field("planned", title="Mode",
                       description="planned: the cluster being left is up — stop consumers, drain, then switch; "
                                   "unplanned: it is gone — switch from the other cluster alone")
    translation: Literal["auto", Translation] = Field(
        "auto", title="Offset translation", validate_default=True,
        description="auto: precise when planned, mm2 when unplanned; precise: the exact next record, proven by "
                    "content (needs the cluster being left, so planned only); mm2: MM2's checkpoints")
    groups: str | None = Field(None, title="Consumer groups (regex)",
                               description="whole-id regex of the groups to move; empty: the topology's managed "
                                           "groups for the flow")
    drain_timeout: int = Field(600, ge=0, le=MAX_WAIT_S, title="Drain timeout (s)",
                               description="how long a planned move waits for inactive groups and drained "
                                           "replication")
    max_lag: int = Field(0, ge=0, title="Max lag (records)",
                         description="replication counts as drained when every partition is within this many "
                                     "records")
    allow_skips: bool = Field(False, title="Allow skipped records",
                              description="a plan in which some group would start AFTER records it has not read is "
                                          "refused unless this is set (the plan names them and counts the records)")

    @field_validator("groups", mode="before")
    @classmethod
    def _blank(cls, v: Any) -> Any:
        return _blank_to_none(v)

    @field_validator("groups")
    @classmethod
    def _pattern(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                compile_whole_id(v, "groups")
            except Refused as exc:
                raise ValueError(reason(exc)) from None
        return v

    @field_validator("translation")
    @classmethod
    def _translation(cls, v: str, info: ValidationInfo) -> str:
        mode = info.data.get("mode", "planned")
        if v == "auto":
            return "precise" if mode == "planned" else "mm2"
        if mode == "unplanned" and v == "precise":
            raise ValueError("precise reads records on the cluster being left, which an unplanned move cannot "
                             "rely on; use translation=mm2 (or auto) with mode=unplanned")
        return v

    def groups_regex(self, topology: Topology) -> str:
        return self.groups or topology.groups_regex(self.flow_spec)


class FailoverParams(MoveParams):
    """mm2_failover: move the flow's managed consumer groups from its source to its target."""

    approval_runbook: ClassVar[str] = "failover"
    start_reverse_flow: bool = Field(False, title="Start the reverse flow",
                                     description="start TARGET->SOURCE afterwards, ready for a later failback")
    parity: Parity = PARITY_FIELD
    spark_connect: str | None = SPARK_CONNECT_FIELD
    approval: ApprovalChoice = APPROVAL_FIELD

    def check(self, topology: Topology) -> None:
        super().check(topology)
        if self.start_reverse_flow and topology.reverse_of(self.flow_spec) is None:
            raise InvalidParams(f"start_reverse_flow: the topology has no reverse flow "
                                f"{self.flow_spec.target}->{self.flow_spec.source}")


class FailbackParams(MoveParams):
    """mm2_failback: `flow` is the flow that was failed over (e.g. A->B); its groups move back from its
    target to its source, through the reverse flow (B->A), which is stopped afterwards."""

    approval_runbook: ClassVar[str] = "failback"
    restart_flow: bool = Field(True, title="Restart the original flow",
                               description="resume SOURCE->TARGET once the groups are back on SOURCE")
    parity: Parity = PARITY_FIELD
    spark_connect: str | None = SPARK_CONNECT_FIELD
    approval: ApprovalChoice = APPROVAL_FIELD

    def check(self, topology: Topology) -> None:
        super().check(topology)
        if topology.reverse_of(self.flow_spec) is None:
            raise InvalidParams(f"failback of {self.flow} needs the reverse flow {self.flow_spec.target}->"
                                f"{self.flow_spec.source} in the topology")


# -- parsing ----------------------------------------------------------------------------------------

def refuse_unknown(model: type[FormParams], keys: Any) -> None:
    """Every key must be a parameter of the runbook: a misspelling is refused, never ignored (the wording and
    the suggestion are the plugin API's too: `bounds.unknown_keys`)."""
    known = list(model.model_fields)
    message = unknown_keys(keys, known)
    if message:
        raise InvalidParams(message, f"the parameters of this runbook are: {', '.join(known)}")


def check_sizes(model: type[FormParams], raw: Mapping[str, Any]) -> None:
    for key, value in raw.items():
        if isinstance(key, str) and len(key) > PARAM_LIMITS.max_string:
            raise InvalidParams(f"a parameter name is {len(key)} characters long; the limit is "
                                f"{PARAM_LIMITS.max_string}")
        limits = model.limits.get(key, PARAM_LIMITS)
        if isinstance(value, (str, bytes)) and key in model.limits:
            # A structured parameter given as text (an offsets body): its size and nesting now, its strings,
            # keys and integers when it is parsed (`bounds.loads`).
            limits.check_text(key, value)
            continue
        limits.check(key, value)


def parse(model: type[F], raw: Mapping[str, Any], topology: Topology) -> F:
    """Validate `raw` (DAG params, an API body, CLI args) into `model`, checked against the topology."""
    if not isinstance(raw, Mapping):
        raise InvalidParams(f"parameters must be a JSON object, got {shown(raw)}")
    check_sizes(model, raw)
    refuse_unknown(model, raw.keys())
    try:
        params = model.model_validate(dict(raw))
    except ValidationError as exc:
        raise invalid(model, exc, raw) from None
    params.check(topology)
    return params


def invalid(model: type[BaseModel], exc: ValidationError, raw: Mapping[str, Any]) -> InvalidParams:
    """The first error, naming the parameter, the value (bounded) and what is accepted."""
    first = exc.errors(include_input=False)[0]
    loc = [str(p) for p in first["loc"]]
    field = loc[0] if loc else "params"
    msg = first["msg"].removeprefix("Value error, ")
    got = f" (got {shown(raw[field])})" if field in raw else ""
    allowed = accepted_values(model, field)
    return InvalidParams(f"Invalid parameter `{'.'.join(loc) or 'params'}`: {msg}{got}",
                         f"accepted values: {', '.join(allowed)}" if allowed else None)


def accepted_values(model: type[BaseModel], field: str) -> list[str]:
    prop = model.model_json_schema().get("properties", {}).get(field, {})
    return [json.dumps(v) if not isinstance(v, str) else v for v in prop.get("enum", [])]


def check_keys(model: type[FormParams], conf: Mapping[str, Any]) -> None:
    """What can be refused about a run's conf without the topology: its sizes and its keys."""
    if not isinstance(conf, Mapping):
        raise InvalidParams(f"a run's conf must be a JSON object, got {shown(conf)}")
    check_sizes(model, conf)
    refuse_unknown(model, conf.keys())
