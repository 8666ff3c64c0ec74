"""mm2_health_check: every flow's state, lag, heartbeat and checkpoint freshness and hops in one concurrent
pass; thresholds; a metrics sample per flow in the audit store's history; optional restart of FAILED parts.

Cost grows with flows, not with their product: Connect and both clusters are asked per flow, all at
once (`async_all_flow_status`, with one Connect client and one connector listing per Connect cluster); MM2's
heartbeats and checkpoints topics are read once per *target cluster* (one consumer for every flow into
it) and committed group offsets once per *source cluster*.

- heartbeat age = now - the newest heartbeat timestamp for source->target found on any heartbeats topic
  of the target (`heartbeats`, `A.heartbeats`, ...). Only the last `2 * max_heartbeat_age_s` of those
  topics is read (start offsets by timestamp): MM2 writes one per second per flow, forever. None = no
  heartbeat within that window.
- checkpoint age (per managed group) = now - the record timestamp of the group's newest checkpoint in
  `<source>.checkpoints.internal` (read whole: an idle group's newest checkpoint can be old).
  MM2 only emits a checkpoint when a group's offsets change, so age alone cannot be a threshold (an
  idle group is not a fault). A group is *behind* when its committed offset on the source differs
  from its newest checkpoint on a replicated partition; the threshold fails a group that has stayed
  behind, with no newer checkpoint, for longer than `max_checkpoint_age_s` across samples
  (`behind_since` is carried from the previous sample in the metrics history; first seen = now).
  A consumer resuming after an idle hour is no alert; a checkpoint connector that stopped emitting is.
- hops = `replication_hops` on the target's topic listing.

Within one pass each cluster's topic listing is requested once and shared by every flow (`_PassClients`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import struct
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, Iterable, Literal, TypeVar

from confluent_kafka import Message, TopicPartition
from confluent_kafka.admin import OffsetSpec
from pydantic import BaseModel, Field, field_validator

from mirrorbook.audit import AuditStore, MetricsSample
from mirrorbook.bounds import shown
from mirrorbook.clients import Clients
from mirrorbook.connect import AsyncConnectClient, ConnectClient
from mirrorbook.errors import MirrorbookError
from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.reader import read_ranges
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.flows import FlowState, FlowStatus, async_all_flow_status
from mirrorbook.mm2.internal_topics import (checkpoint_value_ok, decode_checkpoint_key, decode_checkpoint_value,
                                            decode_heartbeat)
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.mm2.remote_cluster_utils import group_matcher, replication_hops
from mirrorbook.patterns import whole_id_matcher
from mirrorbook.runbooks import lock
from mirrorbook.runbooks.checks import drain_lag
from mirrorbook.runbooks.connectors import set_connector_state
from mirrorbook.runbooks.engine import GateRefused, Runbook
from mirrorbook.runbooks.params import FormParams, InvalidParams
from mirrorbook.runbooks.plan import INTERNAL_GROUPS
from mirrorbook.topology import FlowSpec, Topology

log = logging.getLogger(__name__)
HEALTH_SOURCE = "mm2_health_check"
FLOW_STATES = tuple(s.value for s in FlowState)
T = TypeVar("T")


class HealthParams(FormParams):
    """The health check's form (and the scheduled run's defaults)."""

    flows: str = Field(".*", title="Flows (regex)",
                       description="whole-name regex of the flows to check, e.g. A->B; default: all")
    restart_failed: bool = Field(False, title="Restart FAILED connectors/tasks",
                                 description="restart FAILED connectors and FAILED tasks (audited); paused or "
                                             "stopped connectors are never touched")
    required_state: Literal["REPLICATING", "CONCERNING", "NOT_REPLICATING", "DISABLED"] = Field(
        "REPLICATING", title="Required state", description="the KIP-1144 state every checked flow must be in")
    max_lag: int = Field(10_000, ge=0, title="Max lag (records)", description="per partition")
    max_heartbeat_age_s: float = Field(120.0, gt=0, title="Max heartbeat age (s)")
    max_checkpoint_age_s: float = Field(600.0, gt=0, title="Max checkpoint staleness (s)",
                                        description="how long a group may stay committed past its newest "
                                                    "checkpoint")
    restart_timeout_s: float = Field(60.0, gt=0, le=600, title="Restart timeout (s)",
                                     description="how long a restarted connector may take to be RUNNING again")

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
        matches = whole_id_matcher(self.flows, "flows")
        chosen = [f for f in topology.flows if matches(f.name)]
        if not chosen:
            raise InvalidParams(f"`flows` {shown(self.flows)} matches no flow; the topology defines: "
                                f"{', '.join(topology.flow_names()) or 'none'}")
        return chosen


# -- results ---------------------------------------------------------------------------------------

class GroupCheckpointHealth(BaseModel):
    group: str
    newest_at: datetime | None = None  # record timestamp of the group's newest checkpoint
    age_s: float | None = None
    behind: list[str] = Field(default_factory=list)  # source partitions committed past the newest checkpoint
    behind_since: datetime | None = None

    def behind_for_s(self, now: datetime) -> float | None:
        return (now - self.behind_since).total_seconds() if self.behind and self.behind_since else None

    def sample(self, now: datetime) -> dict[str, Any]:
        return {"group": self.group, "newest_at": _iso(self.newest_at), "age_s": _round(self.age_s),
                "behind": self.behind[:20], "behind_since": _iso(self.behind_since),
                "behind_for_s": _round(self.behind_for_s(now))}


class FlowHealth(BaseModel):
    flow: str
    source: str
    target: str
    status: FlowStatus
    heartbeat_at: datetime | None = None
    heartbeat_age_s: float | None = None
    heartbeat_lookback_s: float
    checkpoints: list[GroupCheckpointHealth] = Field(default_factory=list)
    hops: int | None = None
    lock_holder: str | None = None
    problems: list[str] = Field(default_factory=list)  # reads that failed (they make the flow unhealthy)
    restarted: list[str] = Field(default_factory=list)
    violations: list[str] = Field(default_factory=list)

    def checkpoint_ages(self) -> dict[str, float | None]:
        return {c.group: c.age_s for c in self.checkpoints}

    def metrics(self, now: datetime) -> dict[str, Any]:
        """FlowStatus.metrics() (its `partitions` rows feed the RPO estimate) plus freshness and verdict."""
        ages = [c.age_s for c in self.checkpoints if c.age_s is not None]
        return {**self.status.metrics(), "source": HEALTH_SOURCE,
                "heartbeat_at": _iso(self.heartbeat_at), "heartbeat_age_s": _round(self.heartbeat_age_s),
                # a list, not a dict keyed by group: the audit store masks values under secret-looking keys
                "checkpoints": [c.sample(now) for c in self.checkpoints],
                "checkpoint_age_s_max": _round(max(ages, default=None)),
                "hops": self.hops, "problems": self.problems, "restarted": self.restarted,
                "violations": self.violations}

    def summary(self) -> dict[str, Any]:
        return {"flow": self.flow, "state": self.status.state.value, "max_lag": self.status.max_lag,
                "total_lag": self.status.total_lag, "heartbeat_age_s": _round(self.heartbeat_age_s),
                "checkpoint_age_s": {c.group: _round(c.age_s) for c in self.checkpoints}, "hops": self.hops,
                "restarted": self.restarted, "violations": self.violations}


class HealthReport(BaseModel):
    observed_at: datetime
    elapsed_s: float
    flows: list[FlowHealth]

    @property
    def ok(self) -> bool:
        return not self.violations()

    def violations(self) -> list[str]:
        return [v for f in self.flows for v in f.violations]

    def summary(self) -> dict[str, Any]:
        return {"observed_at": _iso(self.observed_at), "elapsed_s": round(self.elapsed_s, 3), "ok": self.ok,
                "flows": [f.summary() for f in self.flows]}

    def message(self) -> str:
        bad = sorted({f.flow for f in self.flows if f.violations})
        head = f"{len(bad)} of {len(self.flows)} flow(s) unhealthy ({', '.join(bad)})"
        return "\n".join([head, *(f"- {v}" for v in self.violations())])

    def lines(self) -> list[str]:
        out = []
        for f in self.flows:
            cp = ", ".join(f"{c.group} {_fmt_s(c.age_s)}" for c in f.checkpoints[:10]) or "none"
            out.append(f"{f.flow}: {f.status.state.value}, lag max {f.status.max_lag} total {f.status.total_lag}, "
                       f"heartbeat {_fmt_s(f.heartbeat_age_s)}, hops {f.hops}, checkpoints: {cp}"
                       + (f"; restarted: {'; '.join(f.restarted)}" if f.restarted else "")
                       + ("" if not f.violations else f"  -> {len(f.violations)} violation(s)"))
        return out


def _iso(dt: datetime | None) -> str | None:
    return dt.isoformat() if dt else None


def _round(v: float | None) -> float | None:
    return round(v, 3) if v is not None else None


def _fmt_s(v: float | None) -> str:
    return "none" if v is None else f"{v:.1f}s"


def _at_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, timezone.utc)


# -- what one target cluster's MM2 topics show (read once for all flows into it) --------------------

@dataclass
class _GroupCheckpoints:
    newest_ms: int = -1
    latest: dict[tuple[str, int], bytes] = field(default_factory=dict)  # (target topic, partition) -> raw value

    def upstream(self) -> dict[tuple[str, int], int]:
        return {k: decode_checkpoint_value(v)[0] for k, v in self.latest.items()}


@dataclass
class TargetFreshness:
    cluster: str
    topics: dict[str, int] = field(default_factory=dict)
    heartbeats: dict[tuple[str, str], int] = field(default_factory=dict)  # (source, target) -> newest ts ms
    checkpoints: dict[str, dict[str, _GroupCheckpoints]] = field(default_factory=dict)  # topic -> group -> ...
    malformed: int = 0
    error: str | None = None


class _ListedOnce(KafkaAdmin):
    """A cluster's admin for one pass: the topic listing (a metadata request for every topic) is made
    once and shared by every flow, instead of twice per flow for each side."""

    def __init__(self, base: KafkaAdmin) -> None:
        super().__init__(base.config, base.timeout)
        self._client = base.client  # the same connections
        self._lock = threading.Lock()
        self._metadata: Any = None

    def _listing(self) -> Any:
        with self._lock:
            if self._metadata is None:
                self._metadata = self.client.list_topics(timeout=self.timeout)
            return self._metadata

    def topics(self, include_internal: bool = False) -> dict[str, int]:
        return {t: len(m.partitions) for t, m in self._listing().topics.items()
                if include_internal or not t.startswith("__")}

    def cluster_id(self) -> str | None:
        return self._listing().cluster_id


class _PassClients(Clients):
    """The clients of one health pass: `clients`' resolver and Connect clients; one admin per Kafka cluster
    (aliases with the same client config share it: same cluster, same connections), listed once."""

    def __init__(self, clients: Clients) -> None:
        super().__init__(clients.resolver)
        self._base = clients
        self._admins_lock = threading.Lock()
        self._by_config: dict[str, KafkaAdmin] = {}

    def connect(self, flow: FlowSpec, **kw: Any) -> ConnectClient:
        return self._base.connect(flow, **kw)

    def async_connect(self, flow: FlowSpec, **kw: Any) -> AsyncConnectClient:
        return self._base.async_connect(flow, **kw)

    def admin(self, alias: str) -> KafkaAdmin:
        with self._admins_lock:
            if alias not in self._admins:
                key = json.dumps(self.kafka_config(alias), sort_keys=True, default=str)
                if key not in self._by_config:
                    self._by_config[key] = _ListedOnce(self._base.admin(alias))
                self._admins[alias] = self._by_config[key]
            return self._admins[alias]


def offsets_since(admin: KafkaAdmin, tps: list[TP], since_ms: int) -> dict[TP, int]:
    """First offset at or after `since_ms` per partition; -1 where no record is that recent."""
    if not tps:
        return {}
    spec = OffsetSpec.for_timestamp(since_ms)
    futures = admin.client.list_offsets({TopicPartition(tp.topic, tp.partition): spec for tp in tps},
                                        request_timeout=admin.timeout)
    return {TP(k.topic, k.partition): f.result().offset for k, f in futures.items()}


def scan_freshness(messages: Iterable[Message], heartbeat_topics: set[str], out: TargetFreshness) -> TargetFreshness:
    """Newest heartbeat per (source, target); newest checkpoint record and last checkpoint per group."""
    keys: dict[bytes | None, tuple[str, str, int] | None] = {}
    for m in messages:
        topic, key, value = m.topic(), m.key(), m.value()
        if topic in heartbeat_topics:
            try:
                hb = decode_heartbeat(key, value)
            except (ValueError, IndexError, struct.error):
                out.malformed += 1
                continue
            pair = (hb.source_cluster_alias, hb.target_cluster_alias)
            out.heartbeats[pair] = max(out.heartbeats.get(pair, -1), hb.timestamp_ms)
            continue
        if key not in keys:  # keys repeat: each distinct one is decoded once
            try:
                keys[key] = decode_checkpoint_key(key)
            except (ValueError, IndexError, struct.error):
                keys[key] = None
        gk = keys[key]
        if gk is None or not checkpoint_value_ok(value):
            out.malformed += 1
            continue
        group = out.checkpoints.setdefault(topic, {}).setdefault(gk[0], _GroupCheckpoints())
        group.newest_ms = max(group.newest_ms, m.timestamp()[1])
        group.latest[(gk[1], gk[2])] = value  # offset order per partition: the last one wins
    return out


def read_target(clients: Clients, target: str, flows: list[FlowSpec], since_ms: int,
                timeout_s: float = 30.0) -> TargetFreshness:
    """One listing, one watermark batch, one by-timestamp lookup and ONE consumer read for all `flows` into `target`."""
    out = TargetFreshness(cluster=target)
    admin = clients.admin(target)
    out.topics = admin.topics()
    policies = {ReplicationPolicy.for_flow(f) for f in flows}
    heartbeats = {t for t in out.topics if any(p.is_heartbeats_topic(t) for p in policies)}
    checkpoints = {ReplicationPolicy.for_flow(f).checkpoints_topic(f.source) for f in flows} & set(out.topics)
    tps = [TP(t, p) for t in sorted(heartbeats | checkpoints) for p in range(out.topics[t])]
    marks = admin.watermarks(tps)
    since = offsets_since(admin, [tp for tp in tps if tp.topic in heartbeats], since_ms)
    ranges = {}
    for tp, w in marks.items():
        start = w.low if tp not in since else (since[tp] if since[tp] >= 0 else w.high)
        ranges[tp] = (max(start, w.low), w.high)
    scan_freshness(read_ranges(clients.kafka_config(target), ranges, timeout_s=timeout_s), heartbeats, out)
    if out.malformed:
        log.warning("%d malformed MM2 record(s) skipped in the heartbeats/checkpoints topics of %s",
                    out.malformed, target)
    return out


def read_source_groups(clients: Clients, source: str, regex: str) -> dict[str, dict[TP, int]]:
    """Committed offsets of the managed groups on a source cluster (one listing, all groups in flight together)."""
    admin = clients.admin(source)
    matches = group_matcher(regex)
    groups = sorted(g for g in admin.list_groups() if matches(g) and not INTERNAL_GROUPS.match(g))
    return admin.committed_offsets(groups)


# -- per flow: pure derivation ---------------------------------------------------------------------

def group_checkpoints(flow: FlowSpec, regex: str, status: FlowStatus, target: TargetFreshness,
                      committed: dict[str, dict[TP, int]] | None, previous: MetricsSample | None,
                      now: datetime) -> list[GroupCheckpointHealth]:
    """Age and staleness of each managed group's checkpoints (see the module docstring)."""
    policy = ReplicationPolicy.for_flow(flow)
    found = target.checkpoints.get(policy.checkpoints_topic(flow.source), {})
    matches = group_matcher(regex)
    names = committed.keys() if committed is not None else found.keys()
    groups = sorted(g for g in names if matches(g) and not INTERNAL_GROUPS.match(g))
    replicated = set(status.replicated_topics)
    before = {c["group"]: c for c in (previous.metrics.get("checkpoints") or [])} if previous else {}
    out = []
    for g in groups:
        cps = found.get(g)
        newest = _at_ms(cps.newest_ms) if cps and cps.newest_ms >= 0 else None
        upstream = cps.upstream() if cps else {}
        behind = sorted(str(tp) for tp, off in (committed or {}).get(g, {}).items()
                        if (remote := policy.format_remote_topic(flow.source, tp.topic)) in replicated
                        and upstream.get((remote, tp.partition)) != off)
        since = None
        if behind:
            prev = before.get(g) or {}
            same = prev.get("behind") and prev.get("newest_at") == _iso(newest) and prev.get("behind_since")
            since = datetime.fromisoformat(prev["behind_since"]) if same else now
        out.append(GroupCheckpointHealth(group=g, newest_at=newest, behind=behind, behind_since=since,
                                         age_s=(now - newest).total_seconds() if newest else None))
    return out


def evaluate(fh: FlowHealth, params: HealthParams, now: datetime) -> list[str]:
    """Every threshold `fh` crosses, as messages naming the flow and the figure."""
    st, name, out = fh.status, fh.flow, []
    if st.state.value != params.required_state:
        parts = ", ".join(f"{c.role} {c.state} ({c.tasks_running} task(s) running"
                          + (f", tasks {'/'.join(c.tasks)}" if c.tasks else "") + ")" for c in st.connectors.values())
        out.append(f"flow {name} is {st.state.value} (required {params.required_state}): {parts}")
    out += [f"flow {name}: {p}" for p in [*st.errors, *fh.problems]]
    lag = drain_lag(st)
    if lag:
        tp, worst = max(lag.items(), key=lambda kv: kv[1])
        if worst > params.max_lag:
            out.append(f"flow {name}: replication lag {worst} records on {tp} (max_lag={params.max_lag}; "
                       f"total {sum(lag.values())})")
    hb = f"{fh.source}->{fh.target}"
    if fh.heartbeat_age_s is None:
        out.append(f"flow {name}: no heartbeat {hb} on {fh.target}'s heartbeats topics within the last "
                   f"{fh.heartbeat_lookback_s:.0f}s (max_heartbeat_age_s={params.max_heartbeat_age_s:g})")
    elif fh.heartbeat_age_s > params.max_heartbeat_age_s:
        out.append(f"flow {name}: newest heartbeat {hb} is {fh.heartbeat_age_s:.1f}s old "
                   f"(max_heartbeat_age_s={params.max_heartbeat_age_s:g})")
    for c in fh.checkpoints:
        stale = c.behind_for_s(now)
        if stale is not None and stale > params.max_checkpoint_age_s:
            out.append(f"flow {name}: group {c.group} committed past its newest checkpoint on "
                       f"{', '.join(c.behind[:3])}{' …' if len(c.behind) > 3 else ''} and no newer checkpoint came "
                       f"for {stale:.0f}s (newest checkpoint {_fmt_s(c.age_s)} old; "
                       f"max_checkpoint_age_s={params.max_checkpoint_age_s:g})")
    if out and fh.lock_holder:
        out = [f"{v} [flow locked by {fh.lock_holder}]" for v in out]
    return out


def flow_health(flow: FlowSpec, topology: Topology, status: FlowStatus, target: TargetFreshness,
                committed: dict[str, dict[TP, int]] | None, context: "_Context") -> FlowHealth:
    now, params = context.now, context.params
    hb_ms = target.heartbeats.get((flow.source, flow.target))
    problems = [f"MM2 topics on {target.cluster} unreadable: {target.error}"] if target.error else []
    if flow.source in context.source_errors:
        problems.append(f"committed offsets on {flow.source} unreadable: {context.source_errors[flow.source]}")
    hops = replication_hops(context.clients.admin(flow.target), flow.source,
                            ReplicationPolicy.for_flow(flow)) if target.topics else None
    fh = FlowHealth(flow=flow.name, source=flow.source, target=flow.target, status=status,
                    heartbeat_at=_at_ms(hb_ms) if hb_ms is not None else None,
                    heartbeat_age_s=max(0.0, now.timestamp() - hb_ms / 1000) if hb_ms is not None else None,
                    heartbeat_lookback_s=params.heartbeat_lookback_s,
                    checkpoints=group_checkpoints(flow, topology.managed_groups(flow), status, target, committed,
                                                  context.previous.get(flow.name), now),
                    hops=hops, lock_holder=context.locks.get(flow.name), problems=problems)
    fh.violations = evaluate(fh, params, now)
    return fh


# -- one pass over many flows ----------------------------------------------------------------------

@dataclass
class _Context:
    clients: Clients
    params: HealthParams
    now: datetime
    previous: dict[str, MetricsSample | None] = field(default_factory=dict)
    locks: dict[str, str | None] = field(default_factory=dict)
    source_errors: dict[str, str] = field(default_factory=dict)

    def read_history(self, audit: AuditStore | None, flows: list[FlowSpec]) -> None:
        """Each flow's previous sample (checkpoint staleness carries over) and lock holder (named in alerts)."""
        if audit is None:
            return
        for f in flows:
            self.previous[f.name] = audit.latest_metrics(f.name)
            holder = audit.lock_holder(f.name)
            self.locks[f.name] = holder.describe() if holder else None


def _union(regexes: Iterable[str]) -> str:
    return "|".join(f"(?:{r})" for r in sorted(set(regexes)))


async def _guarded(fn: Callable[[], T], on_error: Callable[[Exception], T]) -> T:
    try:
        return await asyncio.to_thread(fn)
    except Exception as exc:  # one unreachable cluster must not hide the other flows' health
        return on_error(exc)


async def collect(context: _Context, topology: Topology, flows: list[FlowSpec],
                  audit: AuditStore | None = None) -> HealthReport:
    """Statuses of all flows, the MM2 topics of each target cluster and the groups of each source cluster, at once."""
    t0 = time.monotonic()
    by_target: dict[str, list[FlowSpec]] = defaultdict(list)
    by_source: dict[str, list[str]] = defaultdict(list)
    for f in flows:
        by_target[f.target].append(f)
        by_source[f.source].append(topology.managed_groups(f))
    since_ms = int((context.now.timestamp() - context.params.heartbeat_lookback_s) * 1000)

    def target_failed(alias: str) -> Callable[[Exception], TargetFreshness]:
        return lambda exc: TargetFreshness(cluster=alias, error=str(exc))

    def source_failed(alias: str) -> Callable[[Exception], None]:
        def failed(exc: Exception) -> None:
            context.source_errors[alias] = str(exc)  # checkpoint groups then come from the checkpoints alone
        return failed

    # Each source's listing is taken (and its connection opened) while Connect answers, not after.
    listed = [_guarded(context.clients.admin(s).topics, lambda exc: None) for s in by_source]
    statuses, _, *rest = await asyncio.gather(
        async_all_flow_status(context.clients, flows),
        asyncio.to_thread(context.read_history, audit, flows),
        *listed,
        *(_guarded(lambda t=t, fs=fs: read_target(context.clients, t, fs, since_ms), target_failed(t))
          for t, fs in by_target.items()),
        *(_guarded(lambda s=s, rs=rs: read_source_groups(context.clients, s, _union(rs)), source_failed(s))
          for s, rs in by_source.items()))
    rest = rest[len(listed):]
    targets = dict(zip(by_target, rest[:len(by_target)]))
    sources = dict(zip(by_source, rest[len(by_target):]))
    healths = [flow_health(f, topology, st, targets[f.target], sources[f.source], context)
               for f, st in zip(flows, statuses)]
    return HealthReport(observed_at=context.now, elapsed_s=time.monotonic() - t0, flows=healths)


def run_concurrently(make: Callable[[], Awaitable[T]], workers: int) -> T:
    """asyncio.run with a default executor sized for the blocking Kafka calls it fans out to threads."""
    async def main() -> T:
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=workers))
        return await make()
    return asyncio.run(main())


def collect_once(clients: Clients, topology: Topology, flows: list[FlowSpec], params: HealthParams,
                 audit: AuditStore | None) -> HealthReport:
    """One health pass, without side effects (previous samples and lock holders read from `audit`)."""
    context = _Context(_PassClients(clients), params, datetime.now(timezone.utc))
    workers = 4 + 3 * len(flows)
    return run_concurrently(lambda: collect(context, topology, flows, audit), workers)


# -- restarting FAILED connectors and tasks (audited) -----------------------------------------------

def failed_roles(status: FlowStatus) -> list[str]:
    """Roles to restart: a FAILED connector, or FAILED tasks of a RUNNING one. Paused and stopped
    connectors are an operator's decision: never touched."""
    return [role for role, c in status.connectors.items()
            if c.state == "FAILED" or (c.state == "RUNNING" and "FAILED" in c.tasks)]


def restart_failed(rb: Runbook, clients: Clients, flow: FlowSpec, roles: list[str], timeout_s: float) -> list[str]:
    """Restart through the runbook engine (each call audited) under the flow's lock; one note per connector."""
    try:
        lock.acquire(rb, [flow])
    except GateRefused as exc:
        return [f"not restarted: {exc.message}"]
    notes = []
    try:
        with clients.connect(flow) as client:
            for role in roles:
                name = flow.connector(role)
                try:
                    set_connector_state(rb, client, flow, role, "RUNNING", timeout_s=timeout_s)
                    notes.append(f"{name}: restarted FAILED parts, RUNNING again")
                except MirrorbookError as exc:
                    notes.append(f"{name}: restart did not bring it back: {exc.message}")
    finally:
        lock.release(rb, [flow])
    return notes


def run_health_check(clients: Clients, topology: Topology, flows: list[FlowSpec], params: HealthParams,
                     audit: AuditStore, rb: Runbook) -> HealthReport:
    """Collect; restart FAILED parts if asked (then look again at those flows); record one sample per flow."""
    report = collect_once(clients, topology, flows, params, audit)
    todo = {fh.flow: roles for fh in report.flows if (roles := failed_roles(fh.status))} \
        if params.restart_failed else {}
    if todo:
        notes = {name: restart_failed(rb, clients, topology.flow(name), roles, params.restart_timeout_s)
                 for name, roles in todo.items()}
        again = collect_once(clients, topology, [topology.flow(n) for n in todo], params, audit)
        fresh = {fh.flow: fh for fh in again.flows}
        for fh in fresh.values():
            fh.restarted = notes[fh.flow]
        report = HealthReport(observed_at=again.observed_at, elapsed_s=report.elapsed_s + again.elapsed_s,
                              flows=[fresh.get(fh.flow, fh) for fh in report.flows])
    for fh in report.flows:
        audit.record_metrics(fh.flow, report.observed_at, fh.metrics(report.observed_at))
    return report

