"""The Prometheus series mirrorbook serves at `/mirrorbook/metrics`: every flow's state, lag, freshness and lost
records as the health check last sampled them, and the runbooks' RTOs and run counts — all read from the audit
store. A scrape never calls Kafka or Connect: it costs a few queries, and works while a cluster is down (which is
when the dashboards are looked at).

`MirrorbookCollector` is a custom collector: each scrape builds a fresh registry around one (`exposition`), so
no metric object outlives a request and nothing is registered process-wide.

Series (per flow, labels `flow` and more):
- `mirrorbook_flow_state{state}` — one-hot over the KIP-1144 states and `UNKNOWN`: not sampled yet, or the last
  check could not read the flow's connectors (mm2/flows.py);
- `mirrorbook_flow_replication_lag_records{topic,partition}` and `mirrorbook_flow_replication_lag_max_records`;
- `mirrorbook_flow_heartbeat_age_seconds` (+Inf: no heartbeat within the check's lookback);
- `mirrorbook_flow_checkpoint_age_seconds{group}` (groups MM2 checkpointed) and `..._max_seconds`;
- `mirrorbook_flow_connector_running{role,connector}` — 1 while Connect showed the connector RUNNING;
- `mirrorbook_flow_records_lost_total{cause,topic,partition}` — DATA_LOSS and TARGET_RESET (runbooks/health/loss.py);
- `mirrorbook_flow_violations` — thresholds the flow crossed at the last check (0: healthy);
- `mirrorbook_flow_sample_age_seconds` — how old the health check's sample is (all of the above are that old);
- `mirrorbook_runbook_last_rto_seconds{dag,flow}` — the newest measured RTO of a failover, failback or drill;
- `mirrorbook_runbook_runs_total{dag,result}` — runs that ended, by result (success, failed, dry_run).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any, Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector, CollectorRegistry

from mirrorbook.audit import AuditStore, MetricsSample
from mirrorbook.mm2.flows import FlowState
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.runbooks.health.loss import FlowLoss
from mirrorbook.runbooks.health.params import FLOW_STATES
from mirrorbook.runbooks.health.results import latest_sample
from mirrorbook.runbooks.user_topics import record_kind
from mirrorbook.topology import FlowSpec, Topology

UNKNOWN = FlowState.UNKNOWN.value  # also what a flow is before its first sample
# The runbooks whose reports measure an RTO: their artifact kind -> the DAG that wrote it.
RTO_REPORTS = {"failover-report": "mm2_failover", "failback-report": "mm2_failback", "drill-report": "dr_drill"}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


# Every family a scrape serves, made up front so each appears (with its HELP) even before it has samples.
FAMILIES: list[tuple[str, str, str, list[str]]] = [
    ("gauge", "mirrorbook_flow_state", "The flow's KIP-1144 state at the last health check (1 for the state it is in; "
     "UNKNOWN: never sampled, or its connectors could not be read)", ["flow", "source", "target", "state"]),
    ("gauge", "mirrorbook_flow_replication_lag_records", "Records of a source partition not replicated yet, in "
     "source offsets from the source connector's next offset to the high watermark, counted as records (transaction "
     "markers and aborted records are not; at most this many where the range was not read whole)",
     ["flow", "topic", "partition"]),
    ("gauge", "mirrorbook_flow_replication_lag_max_records", "The largest replication lag of any partition of the "
     "flow", ["flow"]),
    ("gauge", "mirrorbook_flow_heartbeat_age_seconds", "Age of the newest MM2 heartbeat of the flow on its target "
     "(+Inf: none within the health check's lookback)", ["flow"]),
    ("gauge", "mirrorbook_flow_checkpoint_age_seconds", "Age of a managed group's newest MM2 checkpoint (groups MM2 "
     "checkpointed)", ["flow", "group"]),
    ("gauge", "mirrorbook_flow_checkpoint_age_max_seconds", "The oldest of the flow's groups' newest checkpoints",
     ["flow"]),
    ("gauge", "mirrorbook_flow_connector_running", "1 if Connect showed the connector RUNNING at the last health "
     "check, else 0", ["flow", "role", "connector"]),
    ("counter", "mirrorbook_flow_records_lost", "Records the flow lost: deleted from the source before MM2 "
     "replicated them (cause data_loss) or gone from the target by a truncated or re-created topic (target_reset)",
     ["flow", "cause", "topic", "partition"]),
    ("gauge", "mirrorbook_flow_violations", "Thresholds the flow crossed at the last health check (0: healthy)",
     ["flow"]),
    ("gauge", "mirrorbook_flow_sample_age_seconds", "Age of the health check's newest sample of the flow, which "
     "every mirrorbook_flow_* series comes from", ["flow"]),
    ("gauge", "mirrorbook_runbook_last_rto_seconds", "RTO of the newest failover, failback or drill of the flow "
     "that measured one", ["dag", "flow"]),
    ("counter", "mirrorbook_runbook_runs", "Runbook and health check runs that ended, by result", ["dag", "result"]),
]


def series_names() -> set[str]:
    """Every series name a scrape can serve (counters with their `_total`)."""
    return {name + ("_total" if kind == "counter" else "") for kind, name, _, _ in FAMILIES}


Family = GaugeMetricFamily | CounterMetricFamily


class MirrorbookCollector(Collector):
    """One scrape's metrics, from `topology`'s flows and `audit` (nothing else is asked)."""

    def __init__(self, topology: Topology, audit: AuditStore, now: Callable[[], datetime] | None = None) -> None:
        self.topology, self.audit = topology, audit
        self.now = now or (lambda: datetime.now(timezone.utc))

    def collect(self) -> Iterator[Metric]:
        fam: dict[str, Family] = {name: (GaugeMetricFamily if kind == "gauge" else CounterMetricFamily)(
            name, doc, labels=labels) for kind, name, doc, labels in FAMILIES}
        now = self.now()
        for flow in self.topology.flows:
            self._flow(fam, flow, latest_sample(self.audit, flow.name), now)
        self._runbooks(fam)
        yield from fam.values()

    def _flow(self, fam: dict[str, Family], flow: FlowSpec, sample: MetricsSample | None, now: datetime) -> None:
        name = flow.name
        m = sample.metrics if sample else {}
        state = m.get("state") if m.get("state") in FLOW_STATES else UNKNOWN
        for s in (*FLOW_STATES, UNKNOWN):
            fam["mirrorbook_flow_state"].add_metric([name, flow.source, flow.target, s], 1.0 if s == state else 0.0)
        if sample is None:
            return
        for role, connector in flow.connector_names.items():
            c = (m.get("connectors") or {}).get(role)
            running = isinstance(c, dict) and c.get("state") == "RUNNING"
            fam["mirrorbook_flow_connector_running"].add_metric([name, role, connector], 1.0 if running else 0.0)
        fam["mirrorbook_flow_sample_age_seconds"].add_metric([name],
                                                             max(0.0, (now - sample.observed_at).total_seconds()))
        fam["mirrorbook_flow_violations"].add_metric([name], float(len(m.get("violations") or [])))
        self._lag(fam, flow, m.get("partitions"))
        if "heartbeat_age_s" in m:  # None: the check found no heartbeat within its lookback
            heartbeat = _number(m["heartbeat_age_s"])
            fam["mirrorbook_flow_heartbeat_age_seconds"].add_metric([name],
                                                                    math.inf if heartbeat is None else heartbeat)
        ages = [(str(c.get("group")), a) for c in m.get("checkpoints") or []
                if isinstance(c, dict) and (a := _number(c.get("age_s"))) is not None]
        for group, age in ages:
            fam["mirrorbook_flow_checkpoint_age_seconds"].add_metric([name, group], age)
        if ages:
            fam["mirrorbook_flow_checkpoint_age_max_seconds"].add_metric([name], max(a for _, a in ages))
        for row in FlowLoss.from_sample(m).ledger:
            fam["mirrorbook_flow_records_lost"].add_metric([name, row.cause, row.topic, str(row.partition)],
                                                           float(row.records))

    @staticmethod
    def _lag(fam: dict[str, Family], flow: FlowSpec, rows: Any) -> None:
        """User partitions only, as the check's own lag threshold counts them (no heartbeats, no MM2 topics)."""
        policy = ReplicationPolicy.for_flow(flow)
        lags = [(r["topic"], str(r["partition"]), float(r["lag"])) for r in rows if isinstance(r, dict)
                and isinstance(r.get("topic"), str) and _number(r.get("lag")) is not None
                and record_kind(policy, r["topic"]) is None] if isinstance(rows, list) else []
        for topic, partition, lag in lags:
            fam["mirrorbook_flow_replication_lag_records"].add_metric([flow.name, topic, partition], lag)
        if lags:
            fam["mirrorbook_flow_replication_lag_max_records"].add_metric([flow.name], max(lag for _, _, lag in lags))

    def _runbooks(self, fam: dict[str, Family]) -> None:
        newest: dict[tuple[str, str], float] = {}
        for kind, dag in RTO_REPORTS.items():
            for art in self.audit.artifacts(kind=kind):  # oldest first: the newest measured one stays
                rto, flow = _number(art.summary.get("rto_s")), art.summary.get("flow")
                if rto is not None and isinstance(flow, str):
                    newest[(dag, flow)] = rto
        for (dag, flow), rto in sorted(newest.items()):
            fam["mirrorbook_runbook_last_rto_seconds"].add_metric([dag, flow], rto)
        for (dag, result), n in sorted(self.audit.run_result_counts().items()):
            fam["mirrorbook_runbook_runs"].add_metric([dag, result], float(n))


def exposition(topology: Topology, audit: AuditStore, accept: str | None = None,
               now: Callable[[], datetime] | None = None) -> tuple[bytes, str]:
    """One scrape: the body and its content type (Prometheus text, or OpenMetrics when `accept` asks for it)."""
    registry = CollectorRegistry()
    registry.register(MirrorbookCollector(topology, audit, now))
    encoder, content_type = choose_encoder(accept or "")
    return encoder(registry), content_type
