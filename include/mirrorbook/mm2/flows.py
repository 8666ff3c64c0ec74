"""Flow status exactly as KIP-1144 defines it, for MM2 flows hosted on a Kafka Connect cluster.

What the KIP's `detailedState` flags mean for a Connect-hosted flow (the KIP targets dedicated MM2,
where `enabled` is the `A->B.enabled` setting; on Connect there is no such switch, so we derive it):

- enabled: the flow's MirrorSourceConnector exists on its Connect cluster and is not STOPPED.
  Stopping the source connector (what a failover does) is how a Connect-hosted flow is switched off;
  a PAUSED flow is still enabled (it is meant to resume) and so shows NOT_REPLICATING, not DISABLED.
- ready: the Connect cluster answered and all three connectors of the flow exist on it.
- allConnectorsRunning: source, checkpoint and heartbeat connectors are all RUNNING.
- sourceTaskRunning: the source connector has at least one RUNNING task.

state = DISABLED if not enabled; REPLICATING if allConnectorsRunning and sourceTaskRunning;
CONCERNING if sourceTaskRunning but not allConnectorsRunning; NOT_REPLICATING otherwise.

UNKNOWN is mirrorbook's, not the KIP's: the flow's connectors could not be read (Connect did not answer, refused
mirrorbook's credentials, or mirrorbook refused its TLS certificate). The KIP's formula needs the flags, and a
dedicated MM2's REST API answers about itself — it never has to describe a herder it cannot reach. On Connect the
flags come from another process, so they can be unknown; the formula would then say DISABLED (not `enabled`), a
state the flow is not in, and a runbook or an alert would act on it. So the flags are null (not known), the state
is UNKNOWN, and the reason (`FlowStatus.unreadable`) is said before anything else about the flow (`describe`).

Replication lag per partition = the records the source still holds that the source connector has not
replicated, in source offsets [max(its committed offset + 1, the source log start), high watermark) — counted
as records, not offsets (`mm2/lag.py`: transaction markers and aborted records take offsets; a range is read
only where its offsets exceed what the caller needs to know). Connect commits source offsets every
`offset.flush.interval.ms`, so lag trails by up to that. A partition the connector has not committed anything
for lags by its whole retained range. Records deleted (retention, delete-records) before MM2 read them are no
lag — MM2 will never read them: the health check counts them as DATA_LOSS (`runbooks/health/loss.py`), and a
drained-replication gate does not wait for them.
"""

from __future__ import annotations

import time
from enum import Enum
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from mirrorbook.connect import ConnectError
from mirrorbook.connect.models import ConnectorOffsets, ConnectorStatus, ConnectorView
from mirrorbook.errors import Refused
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.topology import CONNECTOR_CLASSES, FlowSpec


class FlowState(str, Enum):
    DISABLED = "DISABLED"
    REPLICATING = "REPLICATING"
    CONCERNING = "CONCERNING"
    NOT_REPLICATING = "NOT_REPLICATING"
    UNKNOWN = "UNKNOWN"  # mirrorbook's: the connectors could not be read (see the module docstring)


# The KIP's four states: what a flow can be required to be (the choices of a form field). UNKNOWN is no state to
# require. Spelled out (a type checker cannot read a Literal made at run time), and held to the enum here.
FlowStateName = Literal["DISABLED", "REPLICATING", "CONCERNING", "NOT_REPLICATING"]
assert set(get_args(FlowStateName)) == {s.value for s in FlowState} - {FlowState.UNKNOWN.value}


class DetailedState(BaseModel):
    """The KIP's flags; null (None) when the connectors could not be read."""

    model_config = ConfigDict(populate_by_name=True)
    enabled: bool | None
    ready: bool | None
    all_connectors_running: bool | None = Field(alias="allConnectorsRunning")
    source_task_running: bool | None = Field(alias="sourceTaskRunning")

    def state(self) -> FlowState:
        """The KIP-1144 formula, verbatim — on flags that are known; UNKNOWN where they are not."""
        if None in (self.enabled, self.all_connectors_running, self.source_task_running):
            return FlowState.UNKNOWN
        if not self.enabled:
            return FlowState.DISABLED
        if self.all_connectors_running and self.source_task_running:
            return FlowState.REPLICATING
        if self.source_task_running and not self.all_connectors_running:
            return FlowState.CONCERNING
        return FlowState.NOT_REPLICATING


class Unreadable(BaseModel):
    """Why a flow's connectors could not be read: the cause every message showing the flow leads with."""

    cause: str  # one line, refusal first: "Connect cluster B (…) refused the credentials of basic-auth user …"
    fix: str | None = None
    refused: bool = False  # refused (credentials, TLS): asking again cannot help, unlike a worker not answering

    @classmethod
    def of(cls, exc: Exception) -> Unreadable:
        if isinstance(exc, ConnectError):
            return cls(cause=exc.headline(), fix=exc.hint, refused=isinstance(exc, Refused))
        return cls(cause=f"{type(exc).__name__}: {exc}", refused=isinstance(exc, Refused))


class ConnectorSummary(BaseModel):
    name: str
    role: str
    connector_class: str
    state: str  # Connect's state, or MISSING (404) / UNKNOWN (Connect could not be read: `trace` says why)
    tasks_running: int = 0
    tasks: list[str] = []
    worker_id: str | None = None
    trace: str | None = None


class PartitionLag(BaseModel):
    topic: str
    partition: int
    remote_topic: str
    high_watermark: int
    replicated_offset: int | None  # last upstream offset the source connector committed
    lag: int  # records not replicated yet: at most this many (exactly, when `lag_low` equals it)
    log_start: int | None = None  # the source partition's log start offset (None: not read)
    offset_lag: int | None = None  # the same range in offsets (markers and aborted records included)
    lag_low: int | None = None  # at least this many records (None: a sample older than records counting)

    @property
    def lag_exact(self) -> bool:
        """Whether `lag` is the count itself (a row made before counting in records says nothing more)."""
        return self.lag_low is None or self.lag_low == self.lag


class FlowStatus(BaseModel):
    flow: str
    source: str
    target: str
    connect_cluster: str
    state: FlowState
    detailed_state: DetailedState
    connectors: dict[str, ConnectorSummary]
    replicated_topics: list[str] = []
    kafka_cluster_id: str | None = None
    lag: list[PartitionLag] = []
    total_lag: int = 0
    max_lag: int = 0
    errors: list[str] = []  # what could not be read, the cause of an UNKNOWN state first
    unreadable: Unreadable | None = None  # set when the state is UNKNOWN
    observed_at: float = Field(default_factory=time.time)

    def describe(self, required: str | None = None, errors: bool = True) -> str:
        """The flow's state in words, the cause first: a flow whose connectors could not be read begins with
        what refused (or did not answer), and only then says that the flow is UNKNOWN. `required`: the state
        it had to be in; `errors`: also what else could not be read (always, for an UNKNOWN flow)."""
        want = f" (required {required})" if required else ""
        if self.unreadable is not None:
            rest = [e for e in self.errors if e != self.unreadable.cause]
            return (f"{self.unreadable.cause}; so flow {self.flow} is {self.state.value}{want}: its connectors could "
                    "not be read" + (f"; {'; '.join(rest)}" if rest else ""))
        parts = ", ".join(f"{c.role} {c.state} ({c.tasks_running} task(s) running"
                          + (f", tasks {'/'.join(c.tasks)}" if c.tasks else "") + ")" for c in self.connectors.values())
        return f"flow {self.flow} is {self.state.value}{want}: {parts}" + (
            f"; {'; '.join(self.errors)}" if errors and self.errors else "")

    def metrics(self) -> dict[str, Any]:
        """The sample the health check keeps in the audit's metrics history (the RPO estimate reads it)."""
        return {
            "state": self.state.value,
            "connectors": {r: {"state": c.state, "tasks_running": c.tasks_running} for r, c in self.connectors.items()},
            "total_lag": self.total_lag,
            "max_lag": self.max_lag,
            "partitions": [{"topic": p.topic, "partition": p.partition, "high_watermark": p.high_watermark,
                            "replicated_offset": p.replicated_offset, "lag": p.lag, "log_start": p.log_start,
                            "offset_lag": p.offset_lag, "lag_low": p.lag_low}
                           for p in self.lag],
            "errors": self.errors,
        }

    def lag_by_partition(self) -> dict[TP, int]:
        return {TP(p.topic, p.partition): p.lag for p in self.lag}

    def kip1144_summary(self) -> dict[str, Any]:
        """One entry of the KIP's `GET /` flows map."""
        return {
            "state": self.state.value,
            "detailedState": self.detailed_state.model_dump(by_alias=True),
            "source": self.source,
            "target": self.target,
            "kafkaClusterId": self.kafka_cluster_id,
            "links": {"herder [GET]": f"/{self.source}/{self.target}"},
        }

    def kip1144_detail(self) -> dict[str, Any]:
        """The KIP's `GET /{source}/{target}` body, plus mirrorbook's lag figures."""
        base = f"/{self.source}/{self.target}"
        out: dict[str, Any] = {
            "state": self.state.value,
            "replicatedTopics": self.replicated_topics,
            "detailedState": self.detailed_state.model_dump(by_alias=True),
            "source": self.source,
            "target": self.target,
            "kafkaClusterId": self.kafka_cluster_id,
        }
        for c in self.connectors.values():
            out[c.connector_class] = c.state
            out[f"{c.connector_class}TasksRunning"] = c.tasks_running
        out["replicationLag"] = {"total": self.total_lag, "max": self.max_lag,
                                 "partitions": [p.model_dump() for p in self.lag]}
        out["links"] = {
            "connectors [GET]": f"{base}/connectors",
            "pause [PUT]": f"{base}/pause",
            "resume [PUT]": f"{base}/resume",
            "offsets [GET]": f"{base}/offsets",
            "offsets modification [PATCH]": f"{base}/offsets",
            "offsets reset [DELETE]": f"{base}/offsets",
        }
        return out


# -- pure derivation -------------------------------------------------------------------------------

def summarize_connectors(flow: FlowSpec, views: dict[str, ConnectorView] | None,
                         connect_error: str | None = None) -> dict[str, ConnectorSummary]:
    out = {}
    for role, name in flow.connector_names.items():
        cls = CONNECTOR_CLASSES[role]
        if views is None:
            out[role] = ConnectorSummary(name=name, role=role, connector_class=cls, state="UNKNOWN",
                                         trace=connect_error)
            continue
        view = views.get(name)
        status: ConnectorStatus | None = view.status if view else None
        if status is None:
            out[role] = ConnectorSummary(name=name, role=role, connector_class=cls, state="MISSING")
            continue
        out[role] = ConnectorSummary(name=name, role=role, connector_class=cls, state=status.connector.state,
                                     tasks_running=status.running_tasks(), tasks=[t.state for t in status.tasks],
                                     worker_id=status.connector.worker_id,
                                     trace=(status.connector.trace or "").strip().splitlines()[0]
                                     if status.connector.trace else None)
    return out


def detailed_state(connectors: dict[str, ConnectorSummary], connect_ok: bool) -> DetailedState:
    if not connect_ok:  # nothing is known of the connectors: no flag is false, none true
        return DetailedState(enabled=None, ready=None, all_connectors_running=None, source_task_running=None)
    source = connectors["source"]
    return DetailedState(
        enabled=source.state not in ("MISSING", "STOPPED"),
        ready=all(c.state != "MISSING" for c in connectors.values()),
        all_connectors_running=all(c.state == "RUNNING" for c in connectors.values()),
        source_task_running=source.tasks_running > 0,
    )


def replicated_topics(flow: FlowSpec, target_topics: list[str], source_offsets_topics: set[str]) -> list[str]:
    """Target topics that mirror this flow's source, through its replication policy."""
    policy = ReplicationPolicy.for_flow(flow)
    out = []
    for t in target_topics:
        if policy.is_internal_topic(t):
            continue
        if policy.identity:
            if t in source_offsets_topics or t == policy.format_remote_topic(flow.source, "heartbeats"):
                out.append(t)
        elif policy.topic_source(t) == flow.source:
            out.append(t)
    return sorted(out)


def compute_lag(flow: FlowSpec, offsets: ConnectorOffsets | None, highs: dict[TP, int],
                lows: dict[TP, int]) -> list[PartitionLag]:
    committed: dict[TP, int] = {}
    for entry in offsets.offsets if offsets else []:
        p = entry.partition
        if p.get("cluster") != flow.source or entry.offset is None:
            continue
        committed[TP(p["topic"], int(p["partition"]))] = int(entry.offset["offset"])
    return lag_rows(flow, committed, highs, lows)


def lag_rows(flow: FlowSpec, committed: dict[TP, int], highs: dict[TP, int], lows: dict[TP, int]) -> list[PartitionLag]:
    """Each source partition of `highs` against the connector's last replicated offset (`committed`), by offsets."""
    policy = ReplicationPolicy.for_flow(flow)
    rows = []
    for tp, high in sorted(highs.items()):
        done, low = committed.get(tp), lows.get(tp, 0)
        lag = max(0, high - max(done + 1, low) if done is not None else high - low)
        # By offsets: exact at 0, else an upper bound until `mm2.lag.count_lag` reads the range.
        rows.append(PartitionLag(topic=tp.topic, partition=tp.partition,
                                 remote_topic=policy.format_remote_topic(flow.source, tp.topic),
                                 high_watermark=high, replicated_offset=done, lag=lag, log_start=lows.get(tp),
                                 offset_lag=lag, lag_low=0))
    return rows
