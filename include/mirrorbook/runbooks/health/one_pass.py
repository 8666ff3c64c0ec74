"""One health pass over many flows: everything read at once, then each flow evaluated.

Cost grows with flows, not with their product: Connect and both clusters are asked per flow, all at
once (`replication.all_status`: for MM2, one Connect client and one connector listing per Connect cluster);
MM2's heartbeats and checkpoints topics are read once per *target cluster* (one consumer for every flow
into it) and committed group offsets once per *source cluster*. The pass runs on `Clients.per_pass()`:
one admin and one topic listing per Kafka cluster, shared by every flow. Once the statuses say which topics
each flow mirrors, their ids and offsets on each target are read in one batch per target (TARGET_RESET).
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import partial
from typing import Awaitable, Callable, Iterable, TypeVar

from mirrorbook.audit import AuditStore, MetricsSample
from mirrorbook.clients import Clients
from mirrorbook.replication import all_status
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.mm2.remote_cluster_utils import replication_hops
from mirrorbook.mm2.flows import FlowStatus
from mirrorbook.runbooks.health.evaluation import flow_health
from mirrorbook.runbooks.health.loss import TargetTopic
from mirrorbook.runbooks.health.params import HealthParams
from mirrorbook.runbooks.health.reading import TargetFreshness, read_mirrored, read_source_groups, read_target
from mirrorbook.runbooks.health.results import HealthReport, latest_sample
from mirrorbook.runbooks.user_topics import record_kind
from mirrorbook.topology import FlowSpec, Topology

T = TypeVar("T")


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
            self.previous[f.name] = latest_sample(audit, f.name)
            holder = audit.lock_holder(f.name)
            self.locks[f.name] = holder.describe() if holder else None


def _union(regexes: Iterable[str]) -> str:
    return "|".join(f"(?:{r})" for r in sorted(set(regexes)))


async def _guarded(fn: Callable[[], T], on_error: Callable[[Exception], T]) -> T:
    try:
        return await asyncio.to_thread(fn)
    except Exception as exc:  # one unreachable cluster must not hide the other flows' health
        return on_error(exc)


async def _each(aws: Iterable[Awaitable[T]]) -> list[T]:
    """Every awaitable at once, their results in order: a gather of one kind (a gather of mixed kinds is untyped).
    Created when it first runs, so a pass's reads start in the order the pass gathers them."""
    return list(await asyncio.gather(*aws))


async def collect(context: _Context, topology: Topology, flows: list[FlowSpec],
                  audit: AuditStore | None = None) -> HealthReport:
    """Statuses of all flows, the MM2 topics of each target cluster and the groups of each source cluster, at once."""
    t0 = time.monotonic()
    by_target: dict[str, list[FlowSpec]] = defaultdict(list)
    by_source: dict[str, list[str]] = defaultdict(list)
    for f in flows:
        by_target[f.target].append(f)
        by_source[f.source].append(topology.groups_regex(f))
    since_ms = int((context.now.timestamp() - context.params.heartbeat_lookback_s) * 1000)

    def target_failed(alias: str) -> Callable[[Exception], TargetFreshness]:
        return lambda exc: TargetFreshness(cluster=alias, error=str(exc))

    def source_failed(alias: str) -> Callable[[Exception], None]:
        def failed(exc: Exception) -> None:
            context.source_errors[alias] = str(exc)  # checkpoint groups then come from the checkpoints alone
        return failed

    # Each source's listing is taken (and its connection opened) while Connect answers, not after.
    listed = [_guarded(context.clients.admin(s).topics, lambda exc: None) for s in by_source]
    statuses, _, _, read_targets, read_sources = await asyncio.gather(
        all_status(context.clients, flows),
        asyncio.to_thread(context.read_history, audit, flows),
        _each(listed),
        _each(_guarded(partial(read_target, context.clients, t, fs, since_ms), target_failed(t))
              for t, fs in by_target.items()),
        _each(_guarded(partial(read_source_groups, context.clients, s, _union(rs)), source_failed(s))
              for s, rs in by_source.items()))
    targets = dict(zip(by_target, read_targets))
    sources = dict(zip(by_source, read_sources))
    mirrored, mirrored_errors = await _read_mirrored(context, by_target, dict(zip((f.name for f in flows), statuses)),
                                                     targets)
    healths = []
    for f, st in zip(flows, statuses):
        target = targets[f.target]
        # From the pass's listing of the target, which read_target already took: no request.
        hops = replication_hops(context.clients.admin(f.target), f.source,
                                ReplicationPolicy.for_flow(f)) if target.topics else None
        healths.append(flow_health(f, topology, st, target, sources[f.source], params=context.params,
                                   now=context.now, previous=context.previous.get(f.name),
                                   lock_holder=context.locks.get(f.name),
                                   source_error=context.source_errors.get(f.source), hops=hops,
                                   mirrored=mirrored.get(f.name), mirrored_error=mirrored_errors.get(f.target)))
    return HealthReport(observed_at=context.now, elapsed_s=time.monotonic() - t0, flows=healths)


async def _read_mirrored(context: _Context, by_target: dict[str, list[FlowSpec]], statuses: dict[str, FlowStatus],
                         targets: dict[str, TargetFreshness]) -> tuple[dict[str, list[TargetTopic]], dict[str, str]]:
    """Per flow, its mirrored user topics on its target as they are now (one read per readable target, all at
    once); and per target that could not be read, why."""
    wanted = {t: {f.name: {topic for topic in statuses[f.name].replicated_topics
                           if record_kind(ReplicationPolicy.for_flow(f), topic) is None} for f in fs}
              for t, fs in by_target.items() if not targets[t].error}
    errors: dict[str, str] = {}

    def read(alias: str, topics: set[str]) -> Awaitable[list[TargetTopic] | None]:
        def failed(exc: Exception) -> None:
            errors[alias] = str(exc)
        return _guarded(lambda: read_mirrored(context.clients, alias, topics), failed)

    found = await asyncio.gather(*(read(t, set().union(*w.values())) for t, w in wanted.items()))
    out: dict[str, list[TargetTopic]] = {}
    for by_flow, topics in zip(wanted.values(), found):
        if topics is not None:
            for name, mine in by_flow.items():
                out[name] = [tt for tt in topics if tt.topic in mine]
    return out, errors


def run_concurrently(make: Callable[[], Awaitable[T]], workers: int) -> T:
    """asyncio.run with a default executor sized for the blocking Kafka calls it fans out to threads."""
    async def main() -> T:
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=workers))
        return await make()
    return asyncio.run(main())


def collect_once(clients: Clients, topology: Topology, flows: list[FlowSpec], params: HealthParams,
                 audit: AuditStore | None) -> HealthReport:
    """One health pass, without side effects (previous samples and lock holders read from `audit`)."""
    context = _Context(clients.per_pass(), params, datetime.now(timezone.utc))
    workers = 4 + 3 * len(flows)
    return run_concurrently(lambda: collect(context, topology, flows, audit), workers)
