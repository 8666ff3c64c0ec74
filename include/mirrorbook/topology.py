"""The topology file: clusters, Connect clusters, MM2 flows and the consumer groups mirrorbook manages.

Everything else (DAG forms, runbooks, the health check, the flows API) reads it. Kafka clusters and
Connect clusters point to Airflow connection ids; `bootstrap_servers`/`url` let the CLI and tests work
without Airflow (and are what devstack writes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from mirrorbook import settings
from mirrorbook.bounds import shown
from mirrorbook.errors import MirrorbookError, Refused
from mirrorbook.patterns import compile_whole_id, reason, whole_id_matcher

CONNECTOR_CLASSES = {
    "source": "MirrorSourceConnector",
    "checkpoint": "MirrorCheckpointConnector",
    "heartbeat": "MirrorHeartbeatConnector",
}
ConnectorRole = Literal["source", "checkpoint", "heartbeat"]
PolicyName = Literal["default", "identity"]  # MM2's DefaultReplicationPolicy / IdentityReplicationPolicy
# What replicates a flow (mirrorbook.replication): MirrorMaker 2 on Kafka Connect is the one there is.
BackendKind = Literal["mm2-connect"]
DEFAULT_RTO_SLO_S = 300


class UnknownFlow(Refused):
    pass


class TopologyError(MirrorbookError):
    pass


def _pattern(value: str) -> str:
    try:
        compile_whole_id(value, "groups")
    except Refused as exc:  # pydantic reports ValueErrors with the field's location
        raise ValueError(reason(exc)) from None
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class KafkaClusterSpec(_Strict):
    connection_id: str
    bootstrap_servers: str | None = None


class ConnectClusterSpec(_Strict):
    connection_id: str
    url: str | None = None


class ConnectorNames(_Strict):
    source: str
    checkpoint: str
    heartbeat: str

    def by_role(self, role: str) -> str:
        return getattr(self, role)

    def items(self) -> list[tuple[str, str]]:
        return [(role, getattr(self, role)) for role in CONNECTOR_CLASSES]


class FlowSpec(_Strict):
    source: str
    target: str
    connect_cluster: str
    connectors: ConnectorNames | None = None
    backend: BackendKind = "mm2-connect"
    replication_policy: PolicyName = "default"
    separator: str = "."
    groups: str | None = Field(default=None, description="managed consumer groups (regex); default: topology.groups")
    rto_slo_s: int = Field(default=DEFAULT_RTO_SLO_S, ge=1, le=7 * 86_400,
                           description="a failover or failback of this flow that runs longer than this (from the "
                                       "moment it was queued) misses its RTO: audited as deadline.missed, alerted")

    @field_validator("groups")
    @classmethod
    def _groups(cls, v: str | None) -> str | None:
        return _pattern(v) if v is not None else v

    @model_validator(mode="after")
    def _default_connector_names(self) -> "FlowSpec":
        if self.connectors is None:
            prefix = f"{self.source}->{self.target}"
            self.connectors = ConnectorNames(**{role: f"{prefix}.{cls}" for role, cls in CONNECTOR_CLASSES.items()})
        return self

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"

    @property
    def connector_names(self) -> ConnectorNames:
        """`connectors`, which may be left out of a topology but is always set once it is validated."""
        assert self.connectors is not None, "set by _default_connector_names"
        return self.connectors

    def connector(self, role: str) -> str:
        return self.connector_names.by_role(role)

    def role_of(self, name: str) -> str | None:
        """The part (role) whose connector is `name`; None when no part of this flow is."""
        return next((role for role, connector in self.connector_names.items() if connector == name), None)


ApprovalMode = Literal["required", "skip"]
APPROVAL_RUNBOOKS = ("failover", "failback", "offsets")


class ApprovalPolicy(_Strict):
    """Whether a runbook that changes something waits for a human to approve its plan (a run's `approval`
    param overrides it; dry runs never wait). Automation that triggers runbooks over the API without anyone
    watching sets `skip` here, or per run."""

    failover: ApprovalMode = "required"
    failback: ApprovalMode = "required"
    offsets: ApprovalMode = "required"
    timeout_s: int = Field(default=3600, ge=60, le=7 * 86_400,
                           description="how long an approval waits for an answer; no answer is a rejection")

    def of(self, runbook: str) -> ApprovalMode:
        return getattr(self, runbook)


class FailoverOnAlert(_Strict):
    """mm2_failover_on_alert: when a flow the health check watches stays NOT_REPLICATING for
    `consecutive_checks` checks in a row, propose its unplanned failover — a run of mm2_failover that always
    waits for a human to approve it. Off unless `enabled`; never twice within `cooldown_s` of a failover, a
    rejection or a proposal of that flow (the audit store says when those were)."""

    enabled: bool = False
    flows: str = Field(default=".*", description="whole-name regex of the flows it watches")
    consecutive_checks: int = Field(default=3, ge=1, le=100,
                                    description="health checks in a row that must find the flow NOT_REPLICATING")
    cooldown_s: int = Field(default=3600, ge=0, le=7 * 86_400,
                            description="no proposal within this long after a failover, a rejection or a proposal "
                                        "of the flow")
    max_wait_s: int = Field(default=3600, ge=60, le=86_400,
                            description="how long a run waits for the checks that follow the change")

    @field_validator("flows")
    @classmethod
    def _regex(cls, v: str) -> str:
        return _pattern(v)

    def watched(self, topology: "Topology") -> list[FlowSpec]:
        matches = whole_id_matcher(self.flows, "failover_on_alert.flows")
        return [f for f in topology.flows if matches(f.name)] if self.enabled else []


class Topology(_Strict):
    clusters: dict[str, KafkaClusterSpec]
    connect_clusters: dict[str, ConnectClusterSpec]
    flows: list[FlowSpec]
    groups: str = Field(default=".*", description="consumer groups managed by failover/failback (regex)")
    spark_connect_connection_id: str | None = Field(
        default=None, max_length=250, pattern=r"^[A-Za-z0-9_.\-]+$",
        description="the Airflow connection (type spark_connect) whose server runs the proofs of this estate "
                    "(a run's `spark_connect` param overrides it); unset: spark_connect_default when it exists")
    approval: ApprovalPolicy = Field(default_factory=ApprovalPolicy,
                                     description="per runbook (failover, failback, offsets): required | skip")
    failover_on_alert: FailoverOnAlert = Field(default_factory=FailoverOnAlert,
                                               description="propose an unplanned failover of a flow that stays "
                                                           "NOT_REPLICATING (off by default)")

    @field_validator("groups")
    @classmethod
    def _regex(cls, v: str) -> str:
        return _pattern(v)

    @model_validator(mode="after")
    def _references(self) -> "Topology":
        seen: set[str] = set()
        for f in self.flows:
            for alias in (f.source, f.target):
                if alias not in self.clusters:
                    raise ValueError(f"flow {f.name}: cluster {alias!r} is not in clusters {sorted(self.clusters)}")
            if f.connect_cluster not in self.connect_clusters:
                raise ValueError(f"flow {f.name}: connect cluster {f.connect_cluster!r} is not in "
                                 f"connect_clusters {sorted(self.connect_clusters)}")
            if f.name in seen:
                raise ValueError(f"flow {f.name} is defined twice")
            seen.add(f.name)
        return self

    def flow_names(self) -> list[str]:
        return [f.name for f in self.flows]

    def flow(self, name: str) -> FlowSpec:
        for f in self.flows:
            if f.name == name:
                return f
        raise UnknownFlow(f"Unknown flow {shown(name)}; the topology defines: {', '.join(self.flow_names()) or 'none'}",
                          "pick one of those, or add the flow to the topology file")

    def reverse_of(self, flow: FlowSpec) -> FlowSpec | None:
        for f in self.flows:
            if f.source == flow.target and f.target == flow.source:
                return f
        return None

    def groups_regex(self, flow: FlowSpec) -> str:
        """The regex of the groups a flow moves: its own, else the topology's default."""
        return flow.groups or self.groups

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json", exclude_none=True), sort_keys=False)


def default_path() -> Path:
    """The `topology` setting ($MIRRORBOOK_TOPOLOGY), else the example shipped in the package (docker-compose's
    estate)."""
    configured = settings.TOPOLOGY.get()
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parent / "topology.yaml"


def load_topology(path: str | Path | None = None) -> Topology:
    p = Path(path) if path else default_path()
    try:
        data = yaml.safe_load(p.read_text())
    except FileNotFoundError:
        raise TopologyError(f"Topology file {p} does not exist",
                            "set MIRRORBOOK_TOPOLOGY to your topology file (`mirrorbook devstack up` writes one)")
    except yaml.YAMLError as exc:
        raise TopologyError(f"Topology file {p} is not valid YAML: {exc}")
    try:
        return Topology.model_validate(data)
    except ValueError as exc:
        raise TopologyError(f"Topology file {p} is invalid: {exc}")
