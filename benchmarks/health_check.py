"""Health-check wall time and request counts for 1, 3 and 6 flows, on a devstack of its own.

Flows beyond A->B are aliases of cluster A replicating their own topics to B (`DevStack.alias_flow`),
each with its own topics (2 x 3 partitions, records) and two consumer groups that MM2 checkpoints, so
every flow has real lag rows, heartbeats and checkpoints. One health pass is `run_health_check`
(what the mm2_health_check task runs, minus Airflow): every flow's Connect status and offsets, both
clusters' metadata and watermarks, the target's heartbeats/checkpoints (one read per target cluster),
the sources' committed offsets, and one metrics sample per flow into an audit store.

Requests are counted where they are made: Connect HTTP calls through the client's `on_call` hook,
Kafka admin requests by wrapping the admin client's methods (one per call; per-group offset fetches
one per group), consumer reads of MM2's topics one per read. Wall time: median of `--runs` passes
after one warm-up, the flow counts interleaved. Target: 6 flows within 2x the time of 1 flow.

Run: .venv/bin/python benchmarks/health_check.py [--runs 7]
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from collections import Counter
from typing import Any

from bench_stack import throwaway_stack

ALIASES = ("C", "D", "E", "F", "G")
COUNTED_ADMIN_CALLS = {"list_topics", "list_offsets", "list_consumer_groups", "describe_consumer_groups",
                       "describe_configs", "describe_topics"}


class Tally:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def add(self, kind: str, n: int = 1) -> None:
        self.counts[kind] += n

    def total(self) -> int:
        return sum(self.counts.values())


def counting_clients(topology: Any, tally: Tally) -> Any:
    """Clients whose Connect clients report every HTTP attempt and whose admins count every request."""
    from mirrorbook.clients import Clients, TopologyResolver
    from mirrorbook.kafka.admin import KafkaAdmin

    class _CountingAdminClient:
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> Any:
            fn = getattr(self._inner, name)
            if name == "list_consumer_group_offsets":
                def per_group(requests: list[Any], *a: Any, **kw: Any) -> Any:
                    tally.add("kafka:offset_fetch", len(requests))
                    return fn(requests, *a, **kw)
                return per_group
            if name in COUNTED_ADMIN_CALLS:
                def counted(*a: Any, **kw: Any) -> Any:
                    tally.add(f"kafka:{name}")
                    return fn(*a, **kw)
                return counted
            return fn

    class CountingAdmin(KafkaAdmin):
        @property
        def client(self) -> Any:
            return _CountingAdminClient(super().client)

    class CountingClients(Clients):
        def _on_call(self, call: Any, status: int | None) -> None:
            tally.add(f"http:{call.method} {re.sub(r'/connectors/[^/]+', '/connectors/{c}', call.path)}")

        def connect(self, flow: Any, **kw: Any) -> Any:
            return super().connect(flow, on_call=self._on_call, **kw)

        def async_connect(self, flow: Any, **kw: Any) -> Any:
            return super().async_connect(flow, on_call=self._on_call, **kw)

        def new_admin(self, alias: str) -> KafkaAdmin:
            return CountingAdmin(self.kafka_config(alias))

    return CountingClients(TopologyResolver(topology))


class ReadCounter:
    """Counts the health check's consumer reads of MM2's topics (one consumer per read) into `tally`."""

    def __init__(self) -> None:
        from mirrorbook.runbooks.health import reading

        self.tally = Tally()
        inner = reading.read_ranges

        def counted(*a: Any, **kw: Any) -> Any:
            self.tally.add("kafka:consumer_read")
            return inner(*a, **kw)

        reading.read_ranges = counted


def build(stack: Any) -> Any:
    """A->B plus five alias flows, each with its own topics and groups (managed by that flow only)."""
    from mirrorbook.devstack.workload import GroupSpec, load
    from mirrorbook.topology import Topology

    state = stack.require()
    a = state.brokers["A"].bootstrap
    topology = state.topology()
    for alias in ("A", *ALIASES):
        load(a, [f"bench-{alias.lower()}-t0", f"bench-{alias.lower()}-t1"], 3, 300,
             [GroupSpec(name=f"bench-{alias.lower()}-g0", position="end-20"),
              GroupSpec(name=f"bench-{alias.lower()}-g1", position="end-150")])
    clusters, flows = dict(topology.clusters), list(topology.flows)
    for alias in ALIASES:
        with_alias = stack.alias_flow(alias, topics=f"bench-{alias.lower()}-.*")  # the stack's flows + this one
        clusters[alias] = with_alias.clusters[alias]
        flows.append(with_alias.flow(f"{alias}->B"))
    flows = [f.model_copy(update={"groups": f"bench-{f.source.lower()}-g.*"}) for f in flows]
    return Topology(clusters=clusters, connect_clusters=topology.connect_clusters, flows=flows, groups=topology.groups)


def wait_checkpointed(topology: Any, timeout_s: float = 120.0) -> None:
    from mirrorbook.clients import Clients, TopologyResolver
    from mirrorbook.mm2.remote_cluster_utils import translate_offsets_all

    clients = Clients(TopologyResolver(topology))
    deadline = time.monotonic() + timeout_s
    for f in topology.flows:
        while not translate_offsets_all(clients.kafka_config("B"), f.source, f.groups or ".*"):
            if time.monotonic() > deadline:
                raise SystemExit(f"no checkpoints for {f.name} after {timeout_s:.0f}s")
            time.sleep(1.0)


def measure(topology: Any, sizes: tuple[int, ...], runs: int, audit: Any,
            reads: ReadCounter) -> dict[int, tuple[float, Tally, Any]]:
    """Median wall time per flow count. Sizes are interleaved round by round, so a load change on the
    machine hits every size alike; the first round warms up (connections, metadata caches)."""
    from mirrorbook.core.engine import RunInfo, Runbook
    from mirrorbook.runbooks.health import HealthParams, run_health_check

    params = HealthParams()
    times: dict[int, list[float]] = {n: [] for n in sizes}
    last: dict[int, tuple[Tally, Any]] = {}
    for i in range(runs + 1):
        for n in sizes:
            tally = reads.tally = Tally()
            clients = counting_clients(topology, tally)
            rb = Runbook(RunInfo(run_id=f"bench-{n}-{i}"), audit)
            t0 = time.perf_counter()
            report = run_health_check(clients, topology, topology.flows[:n], params, audit, rb)
            if i:
                times[n].append(time.perf_counter() - t0)
                last[n] = (tally, report)
    return {n: (statistics.median(times[n]), *last[n]) for n in sizes}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()

    from mirrorbook.audit import AuditStore

    with throwaway_stack("mb-health-bench-", checkpoint_interval_s=2, refresh_topics_interval_s=2,
                         refresh_groups_interval_s=2) as (work, stack):
        t0 = time.monotonic()
        topology = build(stack)
        wait_checkpointed(topology)
        print(f"{len(topology.flows)} flows ready in {time.monotonic() - t0:.1f}s")
        audit = AuditStore(str(work / "audit.db"))
        reads = ReadCounter()
        results = {}
        for n, (wall, tally, report) in measure(topology, (1, 3, 6), args.runs, audit, reads).items():
            results[n] = (wall, tally.total())
            verdict = "all healthy" if report.ok else f"{len(report.violations())} violation(s)"
            print(f"\n{n} flow(s): health check {wall:.3f}s (median of {args.runs}), {tally.total()} requests, "
                  f"{verdict}")
            for kind, count in sorted(tally.counts.items()):
                print(f"    {count:>4}  {kind}")
            if not report.ok:
                print("    " + "\n    ".join(report.violations()))
        (w1, r1), (w6, r6) = results[1], results[6]
        marginal = (r6 - r1) / 5
        print(f"\nwall time 6 flows / 1 flow = {w6 / w1:.2f} (target <= 2)")
        print(f"requests: {r1} for 1 flow, {results[3][1]} for 3, {r6} for 6: {marginal:.1f} more per added flow, "
              f"{r6 / 6:.1f} per flow at 6")
        print(f"RESULT health_check_s_1={w1:.3f} s")
        print(f"RESULT health_check_s_3={results[3][0]:.3f} s")
        print(f"RESULT health_check_s_6={w6:.3f} s")
        print(f"RESULT health_check_requests_per_flow={marginal:.1f}")
    return 0



if __name__ == "__main__":
    raise SystemExit(main())
