"""The disaster path, measured: an unplanned failover with cluster A's broker killed, at 100 and 1,000 groups.

Scene, per size, on a devstack of its own (MM2 at offset.lag.max 100, checkpoints every 5 s):
100 topics x 6 partitions on A with records; N consumer groups, each committed on a random few topics
(~21 group-partitions per group) at varied positions — mid-partition, a few behind the end, at 0; the
health check runs once (its readiness positions and its sample of A's end offsets); then ~20 s of live
traffic (~300 records/s) with six groups committing forward; A's broker is killed; `mm2_failover` runs
through dag.test() with mode=unplanned (translation auto = mm2), proofs off.

Truth: the groups' committed offsets on A right before the kill, what A held, and B read back record by
record (the workload's sequence number is the record's offset on A). Figures:

  unplanned_rto_s_g<N>            trigger -> offsets written and the groups protected (the report's RTO)
  unplanned_rows_without_position group-partitions committed on mirrored topics with no position written
  unplanned_skips                 positions past the group's next record on B (must be 0)
  unplanned_reread_outside_bound  rows whose true re-read lies outside their stated bound (must be 0)
  unplanned_rpo_bound_over_truth  the RPO lower bound minus the true loss, when positive (must be 0)
  unplanned_rpo_bound_g<N>        the failover's RPO lower bound (records), from the RPO sampler's newest sample
  unplanned_rpo_truth_g<N>        the true loss: records on A at the kill that B never received
  unplanned_rpo_estimate_g<N>     the failover's estimate beside the bound (rate x time from the sample to the loss)
  unplanned_rpo_ratio_g<N>        bound / truth (target: >= 0.5 and <= 1; 1.00 when both are 0)
  unplanned_rpo_sample_age_s_g<N> the sample's age when the source stopped answering the sampler

The RPO sampler (`runbooks/rpo_sampler.run_sampler`, what the mm2_rpo_sampler DAG's trigger runs) polls A and
Connect every --poll-s from before the traffic until after the kill, in a thread beside it, keeping its newest
sample in the audit store the failover reads.

Run: .venv/bin/python benchmarks/failover_unplanned.py [--sizes 100,1000] [--poll-s 1.0]
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
import random
import sys
import threading
import time

from bench_stack import throwaway_stack
from failover_rto import _airflow_env, failover_dag

from mirrorbook.kafka.types import TP

TOPICS, PARTITIONS, RECORDS = 100, 6, 100
TRAFFIC_S, RATE = 20.0, 300
ACTIVE_GROUPS = 6


def scene(stack, n_groups: int, rnd: random.Random) -> dict:
    from mirrorbook.devstack.workload import produce
    from mirrorbook.kafka.admin import KafkaAdmin

    state = stack.require()
    a = state.brokers["A"].bootstrap
    admin = KafkaAdmin(a)
    topics = [f"dz-{i:03d}" for i in range(TOPICS)]
    admin.create_topics({t: PARTITIONS for t in topics})
    t0 = time.monotonic()
    while True:  # on a busy machine the broker serves 600 new partitions well after their leaders are known
        try:
            admin.high_watermarks([TP(t, p) for t in topics for p in range(PARTITIONS)])
            break
        except Exception:
            if time.monotonic() - t0 > 180:
                raise
    produce(a, topics, RECORDS, admin=admin)
    print(f"  produced {TOPICS * PARTITIONS * RECORDS} records in {time.monotonic() - t0:.1f}s")
    groups: dict[str, dict[TP, int]] = {}
    for i in range(n_groups):
        mine = rnd.sample(topics, rnd.choice((3, 3, 4, 4, 4)))
        offsets = {}
        for t in mine:
            for p in range(PARTITIONS):
                kind = rnd.random()
                offsets[TP(t, p)] = 0 if kind < 0.1 else RECORDS - rnd.randint(1, 5) if kind < 0.35 else \
                    rnd.randint(1, RECORDS)
        groups[f"dz-g{i:04d}"] = offsets
    for start in range(0, n_groups, 200):
        batch = dict(list(groups.items())[start:start + 200])
        admin.alter_group_offsets(batch)
    print(f"  {n_groups} groups, {sum(len(o) for o in groups.values())} group-partitions committed")
    return {"topics": topics, "groups": groups}


class Traffic:
    """~RATE records/s to A and ACTIVE_GROUPS groups committing forward; after `seconds`, right after a batch
    was acked, it takes the truth (what A holds, where every group is committed) and kills A's broker —
    the disaster strikes mid-traffic, with whatever MM2 had not replicated yet."""

    def __init__(self, bootstrap: str, topics: list[str], groups: dict, rnd: random.Random, seconds: float,
                 kill) -> None:
        from mirrorbook.kafka.admin import KafkaAdmin

        self.bootstrap, self.topics, self.rnd, self.seconds, self.kill = bootstrap, topics, rnd, seconds, kill
        self.groups = list(groups)
        self.active = dict(list(groups.items())[:ACTIVE_GROUPS])
        self.admin = KafkaAdmin(bootstrap)
        self.truth: tuple[dict, dict] | None = None
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        from mirrorbook.devstack.workload import produce

        deadline = time.monotonic() + self.seconds
        while True:
            produce(self.bootstrap, self.rnd.sample(self.topics, 5), RATE // (5 * PARTITIONS), admin=self.admin)
            # The active groups keep up: each commits its partitions' ends, only ever forward.
            highs = self.admin.high_watermarks({tp for o in self.active.values() for tp in o})
            for g, offsets in self.active.items():
                for tp in offsets:
                    offsets[tp] = max(offsets[tp], highs[tp])
            self.admin.alter_group_offsets(self.active)
            if time.monotonic() >= deadline:
                tps = [TP(t, p) for t in self.topics for p in range(PARTITIONS)]
                self.truth = (self.admin.committed_offsets(self.groups), self.admin.high_watermarks(tps))
                self.kill()
                return
            time.sleep(1.0)


class Sampling:
    """The RPO sampler in a thread of its own, as the triggerer runs it: its own event loop, its own clients."""

    def __init__(self, topo, flow, poll_s: float, seconds: float) -> None:
        from mirrorbook.audit import AuditStore
        from mirrorbook.clients import Clients, TopologyResolver
        from mirrorbook.runbooks.rpo_sampler import run_sampler

        self.done = None
        clients, audit = Clients(TopologyResolver(topo)), AuditStore.from_env()

        def run() -> None:
            import asyncio

            self.done = asyncio.run(run_sampler(clients, [flow], audit, duration_s=seconds, poll_s=poll_s))

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()


def run_size(n_groups: int, rnd: random.Random, poll_s: float) -> dict[str, float]:
    with throwaway_stack(f"mb-unplanned-{n_groups}-", checkpoint_interval_s=5, refresh_topics_interval_s=5,
                         refresh_groups_interval_s=5, offset_lag_max=100) as (work, stack):
        from mirrorbook.audit import AuditStore
        from mirrorbook.clients import Clients, TopologyResolver
        from mirrorbook.kafka.admin import KafkaAdmin
        from mirrorbook.kafka.reader import read_ranges
        from mirrorbook.kafka.types import TP
        from mirrorbook.mm2.counts import Count
        from mirrorbook.runbooks.engine import RunInfo, Runbook
        from mirrorbook.runbooks.health import HealthParams, run_health_check
        from mirrorbook.runbooks.move_report import read_report

        state = stack.require()
        a, b = state.brokers["A"].bootstrap, state.brokers["B"].bootstrap
        sc = scene(stack, n_groups, rnd)
        topo = state.topology().model_copy(deep=True)
        for spec in [*topo.clusters.values(), *topo.connect_clusters.values()]:
            spec.connection_id = f"bench_{spec.connection_id}"  # the stack's own addresses
        topo_path = work / "topology.yaml"
        topo_path.write_text(topo.to_yaml())
        _airflow_env(work / "airflow", topo_path)
        admin_a, admin_b = KafkaAdmin(a), KafkaAdmin(b)
        remote = {TP(t, p): TP(f"A.{t}", p) for t in sc["topics"] for p in range(PARTITIONS)}
        def replicated() -> bool:
            if not {r.topic for r in remote.values()} <= set(admin_b.topics()):
                return False
            highs, got = admin_a.high_watermarks(list(remote)), admin_b.high_watermarks(list(remote.values()))
            return all(got[remote[tp]] >= highs[tp] for tp in remote)

        t0 = time.monotonic()
        while time.monotonic() - t0 < 300 and not replicated():  # then a few of MM2's checkpoint rounds
            time.sleep(2)
        time.sleep(15)
        print(f"  replicated and checkpointed in {time.monotonic() - t0:.1f}s")
        clients = Clients(TopologyResolver(topo))
        audit = AuditStore.from_env()
        flow = topo.flow("A->B")
        t0 = time.monotonic()
        params = HealthParams(flows="A->B", max_lag=10**9, max_checkpoint_age_s=10**6)
        health = run_health_check(clients, topo, [flow], params, audit, Runbook(RunInfo(run_id="bench-health"), audit))
        ready = health.flows[0].readiness
        print(f"  health check with readiness in {time.monotonic() - t0:.1f}s: {ready.positions} positions "
              f"({ready.exact} exact) of {ready.group_partitions}")
        sampling = Sampling(topo, flow, poll_s, TRAFFIC_S + 10)
        traffic = Traffic(a, sc["topics"], sc["groups"], rnd, TRAFFIC_S, lambda: stack.stop_cluster("A", kill=True))
        traffic.thread.start()
        traffic.thread.join(TRAFFIC_S + 120)
        assert traffic.truth is not None, "the traffic thread did not reach the kill"
        committed, a_end = traffic.truth
        print(f"  A killed after {TRAFFIC_S:.0f}s of traffic")
        sampling.thread.join(60)
        print(f"  RPO sampler: {sampling.done}")

        dag = failover_dag()
        conf = {**dag.params.dump(), "flow": "A->B", "mode": "unplanned", "groups": "dz-g.*", "parity": "off",
                "approval": "skip"}  # unattended: a human's answer is not the RTO measured
        run = dag.test(run_conf=conf)
        print(f"  DAG run {run.run_id}: {run.state}")
        arts = [x for x in audit.artifacts(run_id=run.run_id) if x.kind == "failover-report"]
        rep = read_report(arts[-1].path)
        tis = {ti.task_id: ti for ti in run.get_task_instances()}
        print("  task durations: " + ", ".join(f"{t}={(ti.end_date - ti.start_date).total_seconds():.1f}s"
                                               for t, ti in sorted(tis.items()) if ti.end_date and ti.start_date))
        rows = {(r["group"], r["target_topic"], r["partition"]): r for r in rep["rows"]}
        b_end = admin_b.high_watermarks(list(remote.values()))
        seq_at = {tp: {} for tp in remote.values()}
        for m in read_ranges(b, {tp: (0, e) for tp, e in b_end.items()}):
            seq_at[TP(m.topic(), m.partition())].setdefault(json.loads(m.value())["seq"], m.offset())
        missing = skips = outside = 0
        odd: list[str] = []
        for g, offsets in committed.items():
            for tp, c in offsets.items():
                r = rows.get((g, remote[tp].topic, tp.partition))
                if r is None:
                    missing += 1
                    continue
                true_next = seq_at[remote[tp]].get(c, b_end[remote[tp]])
                bound = Count.model_validate(r["re_read"])
                bad_skip = r["offset"] > true_next
                bad_bound = not (bound.low <= max(0, true_next - r["offset"]) <= (bound.high or 10**18))
                skips += bad_skip
                outside += bad_bound
                if bad_skip or bad_bound:
                    odd.append(f"{g} {tp} committed {c}: true next on B {true_next}, row {r}")
        lost = sum(a_end[tp] - (max(seq_at[remote[tp]], default=-1) + 1) for tp in remote)
        rpo = rep.get("rpo") or {}
        bound, estimate = rpo.get("records") or 0, (rpo.get("estimate") or {}).get("records")
        kept = audit.replication_sample("A->B")
        lost_at = kept.metrics.get("unreachable_since") if kept else None
        age = ((datetime.fromisoformat(lost_at) - kept.observed_at).total_seconds() if lost_at else None)
        print(f"  plan: {rep['plan']}; RPO lower bound {bound} vs true loss {lost}; estimate {estimate}; "
              f"sample {rpo.get('sample_source')} at {rpo.get('sampled_at')}, {age}s before A stopped answering")
        print(f"  RPO basis: {rpo.get('basis')}")
        for line in odd[:10]:
            print(f"  WRONG: {line}")
        return {f"unplanned_rto_s_g{n_groups}": rep["rto_s"], "rows_without_position": missing, "skips": skips,
                "outside": outside, "rpo_over": max(0, bound - lost),
                "rpo": {"bound": bound, "truth": lost, "estimate": estimate, "age": age, "n": n_groups}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,1000")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--poll-s", type=float, default=1.0, help="the RPO sampler's poll interval (its DAG's default: 1)")
    args = ap.parse_args()
    rnd = random.Random(args.seed)
    results = [run_size(int(n), rnd, args.poll_s) for n in args.sizes.split(",")]
    for r in results:
        for k, v in r.items():
            if k.startswith("unplanned_rto_s"):
                print(f"RESULT {k}={v:.2f} s")
    for r in results:
        f, n = r["rpo"], r["rpo"]["n"]
        ratio = f["bound"] / f["truth"] if f["truth"] else (1.0 if f["bound"] == 0 else float("inf"))
        print(f"RESULT unplanned_rpo_bound_g{n}={f['bound']} records")
        print(f"RESULT unplanned_rpo_truth_g{n}={f['truth']} records")
        print(f"RESULT unplanned_rpo_estimate_g{n}={f['estimate']} records")
        print(f"RESULT unplanned_rpo_ratio_g{n}={ratio:.2f} ratio")
        print(f"RESULT unplanned_rpo_sample_age_s_g{n}={f['age'] if f['age'] is not None else float('nan'):.2f} s")
    print(f"RESULT unplanned_rows_without_position={sum(r['rows_without_position'] for r in results)}")
    print(f"RESULT unplanned_skips={sum(r['skips'] for r in results)}")
    print(f"RESULT unplanned_reread_outside_bound={sum(r['outside'] for r in results)}")
    print(f"RESULT unplanned_rpo_bound_over_truth={sum(r['rpo_over'] for r in results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
