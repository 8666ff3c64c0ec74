"""Scale: the planned failover and the health check at 100 / 300 / 1,000 / 10,000 consumer groups, and how the cost
grows.

Scene (one devstack of its own, MM2 checkpointing every 5 s): 50 topics x 12 partitions on A (600 partitions),
`--records` records per partition on average, spread (half to one and a half times that, by topic); as many consumer
groups as the largest size (10,000 at most, on the same 600 partitions), each committed on a random 5-20 of the
topics at random lags (10% of its partitions at 0, 25% a few records behind the end, the rest anywhere). A size N is
the first N groups (a regex per size). MM2 replicates the records and checkpoints the groups; then, per size:

- the health check, as the mm2_health_check task runs it (`run_health_check`, readiness on), twice on a
  fresh audit store: the first pass proves every group's position (readiness), the second only what moved
  (the scheduled steady state). Wall time, requests (Connect HTTP calls, Kafka admin requests — per-group
  offset fetches one per group —, consumer reads), the process's peak RSS;
- the planned failover through `mm2_failover` with dag.test(), precise and mm2, proofs off — and with
  `--proofs connect` also on a warm Spark Connect server (`devstack up --spark`). Each in a child process of
  its own (its peak RSS is what a task process needs at that size), after a warm-up dry run (dag.test()'s
  one-off API server start, which a running Airflow has paid); each task's time and each step's own time
  (audited); the scene reset after each run (A->B resumed, the groups deleted on B). A precise failover runs as a
  deployment runs it: after a scheduled health check pass on the same audit store, whose readiness positions it
  reuses where they are still exactly true (failover_rto_s_g<N>); and, for comparison, on an audit store that kept
  none (`--fresh`: failover_rto_s_fresh_g<N>, every position proved during the failover).
- with `--scheduler`, the precise failover at each size also through a real Airflow (`airflow standalone`,
  LocalExecutor, REST-triggered, set up as README recommends: benchmarks/failover_rto.py's helpers), after a health
  check pass on its audit store: failover_rto_s_scheduler_g<N>; with `--proofs connect` too, once more with the
  proofs on the warm Spark Connect server: failover_rto_s_scheduler_proofs_g<N>, proof_rto_ratio_scheduler_g<N>.
- with `--seed-faults` (and `--proofs connect`), after the failover with proofs at each size, before the scene's
  reset: every fault the proofs catch seeded into that scene and both proofs run again over all of it
  (benchmarks/seeded_faults.py): each fault must be caught and named, and nothing else may fail.

`--baseline REF` runs every measurement with REF's code too (`git archive REF include dags spark_apps` into a dir,
first on the child's PYTHONPATH), right before ours, on the same stack under the same load: the ratios
baseline/ours are meaningful on a loaded machine even when the absolute figures are not.

Figures (ours): failover_rto_s_g<N> (precise, proofs off, after a health check), failover_rto_s_fresh_g<N>,
failover_rto_s_mm2_g<N>, failover_rto_s_proofs_g<N>, failover_rto_s_scheduler_g<N>, proof_rto_ratio_g<N>,
proof_rto_ratio_scheduler_g<N>, failover_growth_<max>_over_<min>,
precise_exact_share_g<N> (the share of group-partitions the precise plan places exactly), seeded_faults_caught_g<N>,
seeded_faults_missed_g<N> and seeded_faults_unseeded_failures_g<N> (with --seed-faults), health_check_s_g<N>
(steady state), health_check_first_s_g<N>, health_check_requests_g<N>, translate_precise_s_g<N> (the translate step's
own time), task_peak_rss_mb_g<N>. With a baseline, *_base_* beside them. `--profile DIR` writes a pyinstrument
profile (HTML) of each failover child there.

Run: .venv/bin/python benchmarks/failover_scale.py [--sizes 100,300,1000,10000] [--proofs off,connect]
     [--translations precise,mm2] [--fresh] [--scheduler] [--seed-faults] [--baseline main] [--records 500]
     [--stack-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

REPO = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
TOPICS, PARTITIONS, MAX_GROUPS, ROUNDS = 50, 12, 10_000, 10
CHILD_MARK = "CHILD-RESULT "
MM2 = {"checkpoint_interval_s": 5, "refresh_topics_interval_s": 5, "refresh_groups_interval_s": 5}
STEPS = ("precheck", "translate_offsets", "write_offsets", "read_back_offsets", "stop_flow")


def group_name(i: int) -> str:
    return f"sc-g{i:04d}"


def size_regex(n: int) -> str:
    """A whole-id regex matching exactly the first n groups (n a multiple of 100, at most 10,000): their first two
    digits (the hundreds) from 00 to n/100 - 1."""
    assert n % 100 == 0 and 0 < n <= MAX_GROUPS, n
    last = n // 100 - 1
    if last == 99:
        return r"sc-g\d{4}"
    tens, units = divmod(last, 10)
    parts = ([f"[0-{tens - 1}]\\d"] if tens else []) + [f"{tens}[0-{units}]"]
    return rf"sc-g(?:{'|'.join(parts)})\d\d"


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


# -- the scene ---------------------------------------------------------------------------------------

TOPIC_NAMES = [f"sc-t{i:02d}" for i in range(TOPICS)]


def scene(stack: Any, records: int, seed: int, groups: int) -> None:
    """The records, then the first `groups` groups committed (`commit_groups`), then MM2 settled."""
    from mirrorbook.devstack.workload import produce
    from mirrorbook.kafka.admin import KafkaAdmin

    a = stack.require().brokers["A"].bootstrap
    admin = KafkaAdmin(a)
    topics = TOPIC_NAMES
    admin.create_topics({t: PARTITIONS for t in topics})
    t0 = time.monotonic()
    produced = 0
    # Records spread: topics get 0.5x .. 1.5x the average, in rounds a few seconds apart, as live traffic comes —
    # MM2 writes at most one offset sync per partition per offset flush, so one burst would leave one sync.
    for r in range(ROUNDS):
        for k in range(5):
            produced += produce(a, topics[k::5], max(1, int(records * (0.5 + 0.25 * k) / ROUNDS)), admin=admin)
        time.sleep(1.5)
    print(f"  produced {produced} records on {TOPICS * PARTITIONS} partitions in {time.monotonic() - t0:.1f}s")
    commit_groups(stack, seed, 0, groups)


def commit_groups(stack: Any, seed: int, start: int, end: int) -> None:
    """Commit groups start..end-1 of the scene (their offsets drawn from `seed` in order, so a scene made with fewer
    groups and extended gets the very groups a larger one made at once has), then wait for MM2 to settle."""
    from mirrorbook.kafka.admin import KafkaAdmin
    from mirrorbook.kafka.types import TP

    rnd = random.Random(seed)
    admin = KafkaAdmin(stack.require().brokers["A"].bootstrap)
    topics = TOPIC_NAMES
    highs = admin.high_watermarks([TP(t, p) for t in topics for p in range(PARTITIONS)])
    groups: dict[str, dict[TP, int]] = {}
    for i in range(end):
        offsets = {}
        for t in rnd.sample(topics, rnd.randint(5, 20)):
            for p in range(PARTITIONS):
                high, kind = highs[TP(t, p)], rnd.random()
                offsets[TP(t, p)] = 0 if kind < 0.1 else max(0, high - rnd.randint(1, 5)) if kind < 0.35 \
                    else rnd.randint(1, high)
        if i >= start:
            groups[group_name(i)] = offsets
    t0 = time.monotonic()
    names = list(groups)
    # 20 groups a request batch: 100 at once (15,000 partitions) timed out on a loaded 2-core machine at 10,000.
    for first in range(0, len(names), 20):
        admin.alter_group_offsets({g: groups[g] for g in names[first:first + 20]})
    print(f"  groups {start}..{end - 1}: {sum(len(o) for o in groups.values())} group-partitions committed "
          f"in {time.monotonic() - t0:.1f}s")
    wait_mirrored(stack, topics)


def wait_mirrored(stack: Any, topics: list[str], timeout_s: float = 900.0) -> None:
    """Every record replicated to B, then MM2's checkpoints settled (no new group-partition for two rounds)."""
    from mirrorbook.kafka.admin import KafkaAdmin
    from mirrorbook.kafka.types import TP
    from mirrorbook.mm2.internal_topics import read_checkpoints

    state = stack.require()
    admin_a, admin_b = KafkaAdmin(state.brokers["A"].bootstrap), KafkaAdmin(state.brokers["B"].bootstrap)
    tps = [TP(t, p) for t in topics for p in range(PARTITIONS)]
    remote = {tp: TP(f"A.{tp.topic}", tp.partition) for tp in tps}
    t0 = time.monotonic()
    while True:
        if {r.topic for r in remote.values()} <= set(admin_b.topics()):
            highs, got = admin_a.high_watermarks(tps), admin_b.high_watermarks(list(remote.values()))
            if all(got[remote[tp]] >= highs[tp] for tp in tps):
                break
        if time.monotonic() - t0 > timeout_s:
            raise SystemExit(f"not replicated after {timeout_s:.0f}s")
        time.sleep(2)
    print(f"  replicated in {time.monotonic() - t0:.1f}s")
    seen, steady = -1, 0
    while steady < 2 and time.monotonic() - t0 < timeout_s:
        time.sleep(6)
        n = len(read_checkpoints(state.brokers["B"].bootstrap, "A").latest)
        steady = steady + 1 if n == seen else 0
        seen = n
    print(f"  {seen} group-partitions checkpointed by MM2, settled after {time.monotonic() - t0:.1f}s")


def reset(stack: Any, groups: list[str]) -> None:
    """Undo a failover: A->B running again, the groups gone from B."""
    sys.path.insert(0, str(BENCH))
    from failover_rto import _reset

    _reset(stack, groups)


# -- one measurement, in a child process ---------------------------------------------------------------

class CodeVersion:
    """Whose code a child runs: ours (the worktree) or a baseline ref's, extracted once."""

    def __init__(self, name: str, work: Path, ref: str | None = None) -> None:
        self.name, self.ref = name, ref
        self.root = REPO
        if ref is not None:
            self.root = work / f"code-{name}"
            shutil.rmtree(self.root, ignore_errors=True)  # a kept --stack-dir may hold another ref's code
            self.root.mkdir(parents=True)
            # The Spark apps too: the proofs' jobs are found beside `include` (without them, every proof fails).
            archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "include", "dags", "spark_apps"],
                                     check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(self.root)], input=archive, check=True)
        self.home = work / f"airflow-{name}"

    def env(self, topology: Path, audit_db: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "MIRRORBOOK"))}
        env.update({
            "AIRFLOW_HOME": str(self.home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.root / "dags"),
            "AIRFLOW__LOGGING__LOGGING_LEVEL": os.environ.get("BENCH_LOG_LEVEL", "WARNING"),
            "MIRRORBOOK_AUDIT_URL": f"sqlite:///{audit_db}", "MIRRORBOOK_ARTIFACTS_DIR": str(self.home / "artifacts"),
            "MIRRORBOOK_TOPOLOGY": str(topology),
            "PYTHONPATH": os.pathsep.join([str(self.root / "include"), str(BENCH)]),
            **(extra or {}),
        })
        return env

    def migrate(self) -> None:
        env = self.env(Path("/nonexistent"), self.home / "unused.db")
        subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True, capture_output=True, env=env)


def run_child(job: dict[str, Any], env: dict[str, str], timeout_s: float = 3600.0) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(job)], env=env,
                          capture_output=True, text=True, timeout=timeout_s)
    for line in proc.stdout.splitlines():
        if line.startswith(CHILD_MARK):
            return json.loads(line[len(CHILD_MARK):])
    tail = (proc.stdout[-3000:] + "\n" + proc.stderr[-3000:]).strip()
    return {"error": f"child exited {proc.returncode} without a result:\n{tail}"}


def cpu_s() -> float:
    """This process's CPU time (user + system): on a machine shared with other work, what its wall time would be
    alone, less its waits on the clusters."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_failover(job: dict[str, Any]) -> dict[str, Any]:
    import mirrorbook
    from airflow.dag_processing.dagbag import DagBag

    from mirrorbook.audit import AuditStore

    dag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"]).get_dag("mm2_failover")
    # approval=skip: the cutover as automation runs it, unattended (a human's answer is not the RTO measured).
    conf = {**dag.params.dump(), "flow": "A->B", "mode": "planned", "translation": job["translation"],
            "groups": job["groups"], "drain_timeout": 600, "max_lag": 0, "dry_run": False, "parity": job["parity"],
            "approval": "skip"}
    t0 = time.monotonic()
    dag.test(run_conf={**conf, "groups": "sc-no-such-group", "dry_run": True, "parity": "off"})
    warm_s = time.monotonic() - t0
    profiler = None
    if job.get("profile"):
        from pyinstrument import Profiler  # installed for benchmarking (not a dependency of mirrorbook)

        profiler = Profiler(interval=0.002)
        profiler.start()
    cpu0 = cpu_s()
    run = dag.test(run_conf=conf)
    if profiler is not None:
        profiler.stop()
        Path(job["profile"]).write_text(profiler.output_html())
        Path(job["profile"]).with_suffix(".txt").write_text(profiler.output_text(unicode=False, color=False))
    out: dict[str, Any] = {"state": str(run.state), "warm_s": round(warm_s, 1), "code": mirrorbook.__file__,
                           "cpu_s": round(cpu_s() - cpu0, 1), "run_id": run.run_id}
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    out["tasks"] = {t: round((ti.end_date - ti.start_date).total_seconds(), 2) for t, ti in sorted(tis.items())
                    if ti.end_date and ti.start_date}
    out["failed"] = sorted(t for t, ti in tis.items() if str(ti.state) not in ("success", "skipped"))
    audit = AuditStore.from_env()
    steps: dict[str, float] = {}
    for e in audit.events(run_id=run.run_id):
        if e.kind == "step" and "duration_s" in e.details:
            steps[e.action] = round(steps.get(e.action, 0.0) + e.details["duration_s"], 2)
        if e.action == "step.failover.translate" and "translate_s" in e.details:
            out["translate_s"] = e.details["translate_s"]
    out["steps"] = steps
    arts = [x for x in audit.artifacts(run_id=run.run_id) if x.kind == "failover-report"]
    if arts:
        path = Path(arts[-1].path)
        rep = json.loads(path.read_text())
        out.update(rto_s=rep.get("rto_s"), plan=rep.get("plan"), report_mb=round(path.stat().st_size / 2**20, 2))
    out["peak_rss_mb"] = round(peak_rss_mb())
    return out


def child_health(job: dict[str, Any]) -> dict[str, Any]:
    from health_check import ReadCounter, Tally, counting_clients

    from mirrorbook.audit import AuditStore
    from mirrorbook.core.engine import RunInfo, Runbook
    from mirrorbook.runbooks.health import HealthParams, run_health_check
    from mirrorbook.topology import load_topology

    topology = load_topology()
    audit = AuditStore.from_env()
    reads = ReadCounter()
    params = HealthParams(max_lag=10**9, max_checkpoint_age_s=10**6)
    passes = []
    for i in range(job.get("passes", 2)):
        tally = reads.tally = Tally()
        clients = counting_clients(topology, tally)
        rb = Runbook(RunInfo(run_id=f"bench-health-{i}"), audit)
        t0, cpu0 = time.perf_counter(), cpu_s()
        report = run_health_check(clients, topology, topology.flows, params, audit, rb)
        wall, cpu = time.perf_counter() - t0, cpu_s() - cpu0
        r = report.flows[0].readiness
        passes.append({"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "requests": tally.total(),
                       "by_kind": dict(tally.counts),
                       "readiness": r.model_dump(mode="json", include={"group_partitions", "positions", "exact",
                                                                        "recomputed", "changed"}) if r else None,
                       "violations": report.violations()})
    sample = audit.metrics(topology.flows[0].name, limit=1)[0]
    return {"passes": passes, "sample_kb": round(len(json.dumps(sample.metrics, default=str)) / 1024),
            "peak_rss_mb": round(peak_rss_mb())}


def child_main(job: dict[str, Any]) -> int:
    try:
        if job["kind"] == "seeded":
            import seeded_faults

            out = seeded_faults.run(job["run_id"], job["url"], Path(job["out"]))
        else:
            out = child_failover(job) if job["kind"] == "failover" else child_health(job)
    except Exception as exc:  # reported to the parent, which prints it and goes on
        import traceback
        out = {"error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-3000:]}"}
    print(CHILD_MARK + json.dumps(out, default=str), flush=True)
    return 0


# -- the parent -----------------------------------------------------------------------------------

def show_failover(label: str, r: dict[str, Any]) -> None:
    if "error" in r:
        print(f"    {label}: ERROR {r['error']}")
        return
    plan = r.get("plan") or {}
    print(f"    {label}: {r['state']} RTO {r.get('rto_s')}s (the run's CPU {r['cpu_s']}s; warm-up {r['warm_s']}s), "
          f"peak RSS {r['peak_rss_mb']} MB, "
          f"report {r.get('report_mb')} MB; {plan.get('groups')} groups, {plan.get('partitions')} group-partitions, "
          f"methods {plan.get('methods')}" + (f"; FAILED {r['failed']}" if r.get("failed") else ""))
    print("      tasks: " + ", ".join(f"{t}={s}s" for t, s in r["tasks"].items()))
    print("      steps: " + ", ".join(f"{a.removeprefix('step.')}={s}s" for a, s in r["steps"].items()))


def show_seeded(r: dict[str, Any]) -> None:
    if "error" in r:
        print(f"    seeded faults: ERROR {r['error']}")
        return
    print(f"    seeded faults ({r['seeded']}): record proof {r['record_status']} in {r['record_s']}s, group proof "
          f"{r['group_status']} in {r['group_s']}s; failing rows {r['failures_total']}")
    for fault, said in r["caught"].items():
        print(f"      {'CAUGHT' if said else 'MISSED'} {fault}: {said or ''}")
    for what, rows in r["others"].items():
        if rows:
            print(f"      NOT SEEDED, yet failing: {what}: {len(rows)}, first {rows[:5]}")


def show_health(label: str, r: dict[str, Any]) -> None:
    if "error" in r:
        print(f"    {label}: ERROR {r['error']}")
        return
    for i, p in enumerate(r["passes"]):
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(p["by_kind"].items()))
        print(f"    {label} pass {i + 1}: {p['wall_s']}s (CPU {p['cpu_s']}s), {p['requests']} requests ({kinds}); "
              f"readiness {p['readiness']}; "
              f"{len(p['violations'])} violation(s)" + "".join(f"\n      {v[:300]}" for v in p["violations"][:3]))
    print(f"    {label}: peak RSS {r['peak_rss_mb']} MB, metrics sample {r['sample_kb']} KB")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,300,1000")
    ap.add_argument("--translations", default="precise,mm2")
    ap.add_argument("--proofs", default="off", help="off and/or connect (a warm Spark Connect server)")
    ap.add_argument("--proof-sizes", default=None, help="sizes to run the proofs at (default: --sizes)")
    ap.add_argument("--records", type=int, default=500, help="records per partition, on average")
    ap.add_argument("--spark-driver-mb", type=int, default=None,
                    help="the Spark Connect server's driver memory (default: the devstack's, 1024)")
    ap.add_argument("--baseline", default=None, help="a git ref whose code is measured beside ours")
    ap.add_argument("--no-health", action="store_true", help="no standalone health check measurement")
    ap.add_argument("--no-failover", action="store_true")
    ap.add_argument("--fresh", action="store_true",
                    help="also a precise failover with no readiness kept (every position proved during it)")
    ap.add_argument("--scheduler", action="store_true",
                    help="also the precise failover through a real Airflow (airflow standalone, REST-triggered)")
    ap.add_argument("--seed-faults", action="store_true",
                    help="after the failover with proofs at each size, seed every fault the proofs catch into its "
                         "scene and prove it again (benchmarks/seeded_faults.py): each must be caught")
    ap.add_argument("--profile", default=None, help="a directory for a pyinstrument profile of each failover child")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--stack-dir", default=None,
                    help="keep the stack and its scene in this directory, and reuse them when it holds one already")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child_main(json.loads(args.child))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `kill` stops the stack too (the finally clauses)

    sys.path.insert(0, str(BENCH))
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.profile:
        Path(args.profile).resolve().mkdir(parents=True, exist_ok=True)
    print(f"start: {uptime()}")
    results: dict[str, Any] = {}
    with scene_stack(args, max(sizes)) as (work, stack):
        versions = [CodeVersion("ours", work)]
        if args.baseline:
            versions.insert(0, CodeVersion("base", work, args.baseline))
        for v in versions:
            v.migrate()
        state = stack.require()
        topo = state.topology().model_copy(deep=True)
        for spec in [*topo.clusters.values(), *topo.connect_clusters.values()]:
            spec.connection_id = f"bench_{spec.connection_id}"  # the stack's own addresses
        spark_conn: dict[str, str] = {}
        topologies: dict[int, Path] = {}
        for n in sizes:
            regex = size_regex(n)
            flows = [f.model_copy(update={"groups": regex}) if f.name == "A->B" else f for f in topo.flows]
            topo_path = topologies[n] = work / f"topology-{n}.yaml"
            topo_path.write_text(topo.model_copy(update={"flows": flows}).to_yaml())
            print(f"\n== {n} groups ({regex}); {uptime()}")
            if not args.no_health:
                for v in versions:
                    r = run_child({"kind": "health"}, v.env(topo_path, work / f"audit-health-{v.name}-{n}.db"))
                    show_health(f"health check [{v.name}]", r)
                    results[f"health/{v.name}/{n}"] = r
            if args.no_failover:
                continue
            spark_conn = failovers_at(n, args, work, stack, versions, topo_path, spark_conn, results)
        if args.scheduler and not args.no_failover:
            proved = "connect" in args.proofs.split(",")
            if proved and not spark_conn:
                spark_conn = start_spark(stack, args.spark_driver_mb)
            scheduled(work, stack, sizes, topologies, versions[-1], results, spark_conn if proved else {},
                      proof_sizes(args))
        if spark_conn:
            from failover_rto import _close_spark_session
            _close_spark_session()  # while the server is up: at exit pyspark would retry against it for minutes
        print(f"\nend: {uptime()}")
    report(results, sizes, [v.name for v in versions])
    return 0


def proof_sizes(args: argparse.Namespace) -> list[int]:
    return [int(s) for s in (args.proof_sizes or args.sizes).split(",")]


def failovers_at(n: int, args: argparse.Namespace, work: Path, stack: Any, versions: list[CodeVersion],
                 topo_path: Path, spark_conn: dict[str, str], results: dict[str, Any]) -> dict[str, str]:
    """Every failover measured at size `n` (each in a child process of its own); the Spark connection, started
    when a run with proofs first needs it."""
    regex = size_regex(n)
    translations, proofs = args.translations.split(","), args.proofs.split(",")
    profile = Path(args.profile).resolve() if args.profile else None
    # (label, translation, proofs, audit store); a precise failover after a health check pass on its store
    runs = [("precise-fresh", "precise", "off", "fresh")] if args.fresh and "precise" in translations else []
    runs += [(t, t, "off", "kept") for t in translations]
    if "connect" in proofs and n in proof_sizes(args):
        runs.append(("precise", "precise", "spark", "kept"))
    for label, translation, parity, store in runs:
        if parity == "spark" and not spark_conn:
            spark_conn = start_spark(stack, args.spark_driver_mb)
        for v in versions:
            db = work / f"audit-{v.name}-{n}{'-fresh' if store == 'fresh' else ''}.db"
            env = v.env(topo_path, db, spark_conn if parity == "spark" else None)
            if translation == "precise" and store == "kept" and f"prepass/{v.name}/{n}" not in results:
                results[f"prepass/{v.name}/{n}"] = prepass = run_child({"kind": "health", "passes": 1}, env)
                show_health(f"scheduled health check before the failover [{v.name}]", prepass)
            job = {"kind": "failover", "translation": translation, "groups": regex, "parity": parity}
            if profile:
                job["profile"] = str(profile / f"failover-{v.name}-{label}-{parity}-g{n}.html")
            print(f"  -- {label}, proofs {parity}, {v.name}; {uptime()}")
            r = run_child(job, env)
            show_failover(f"failover [{v.name}]", r)
            results[f"failover/{v.name}/{label}/{parity}/{n}"] = r
            if parity == "spark" and args.seed_faults and v is versions[-1] and "run_id" in r:
                results[f"seeded/{n}"] = seeded = run_child({
                    "kind": "seeded", "run_id": r["run_id"], "url": stack.require().spark.url,
                    "out": str(work / f"seeded-{n}")}, env)
                show_seeded(seeded)
            reset(stack, [group_name(i) for i in range(n)])
    return spark_conn


def scheduled(work: Path, stack: Any, sizes: list[int], topologies: dict[int, Path], v: CodeVersion,
              results: dict[str, Any], spark_conn: dict[str, str], proved_at: list[int]) -> None:
    """The precise failover at each size through a real Airflow set up as README recommends (failover_rto.py's
    server and helpers), each after a scheduled health check pass on the server's audit store; with `spark_conn`
    (--proofs connect) once more with the proofs on that warm Spark Connect server, at the sizes `proved_at`
    (the two proofs side by side, as the scheduler runs them)."""
    import httpx
    from failover_rto import SCHEDULER_SETTINGS, _scheduled, _trigger

    sys.path.insert(0, str(REPO))
    from tests.e2e import airflow_server

    db = work / "audit-scheduler.db"
    env = v.env(topologies[max(sizes)], db)
    conns = json.loads(stack.connections_path.read_text())
    env.update({f"AIRFLOW_CONN_BENCH_{cid.upper()}": json.dumps(spec) for cid, spec in conns.items()
                if spec.get("conn_type") != "spark_connect"})
    keep = ("MIRRORBOOK_TOPOLOGY", "MIRRORBOOK_AUDIT_URL", "MIRRORBOOK_ARTIFACTS_DIR", "PYTHONPATH")
    server_env = {**{k: env[k] for k in keep}, **{k: val for k, val in env.items() if k.startswith("AIRFLOW_CONN_")},
                  **spark_conn, **SCHEDULER_SETTINGS, "MIRRORBOOK_HEALTH_SCHEDULE": "none",
                  "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING"}
    os.environ.update({k: env[k] for k in ("MIRRORBOOK_AUDIT_URL", "MIRRORBOOK_ARTIFACTS_DIR")})  # _scheduled reads
    server = airflow_server.start(work / "airflow-scheduler", server_env, preload=True)
    try:
        airflow_server.wait_ready(server, ["mm2_failover"], timeout_s=600)
        api = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.token('admin')}"},
                           timeout=60)
        api.patch("/api/v2/dags/mm2_failover", json={"is_paused": False}).raise_for_status()
        conf = {"flow": "A->B", "mode": "planned", "translation": "precise", "drain_timeout": 600, "max_lag": 0,
                "parity": "off", "approval": "skip"}
        print(f"\n== real scheduler ({server.url}): a dry run first (each component's first-use costs); {uptime()}")
        _trigger(api, {**conf, "groups": "sc-no-such-group", "dry_run": True})
        for n in sizes:
            # (result key, parity, label): proofs off, then on the warm Spark Connect server where asked
            runs = [("scheduler", "off", "")] + ([("scheduler-proofs", "spark", ", proofs on Spark Connect")]
                                                 if spark_conn and n in proved_at else [])
            for key, parity, label in runs:
                prepass = run_child({"kind": "health", "passes": 1}, v.env(topologies[n], db))
                show_health(f"scheduled health check before the failover [scheduler{label}, {n}]", prepass)
                print(f"  -- precise through the real scheduler{label}, {n} groups; {uptime()}")
                results[f"{key}/{n}"] = {"rto_s": _scheduled(api, {**conf, "groups": size_regex(n), "dry_run": False,
                                                                   "parity": parity})}
                reset(stack, [group_name(i) for i in range(n)])
    finally:
        airflow_server.stop(server)


@contextmanager
def scene_stack(args: argparse.Namespace, groups: int) -> Iterator[tuple[Path, Any]]:
    """A devstack with the scene loaded (`groups` groups at least): a throwaway one, or the one kept in --stack-dir
    (made there once, extended with more groups when a run needs them)."""
    from bench_stack import throwaway_stack

    if args.stack_dir is None:
        with throwaway_stack("mb-scale-", **MM2) as (work, stack):
            scene(stack, args.records, args.seed, groups)
            yield work, stack
        return
    from mirrorbook.devstack.config import Mm2Settings, StackSettings
    from mirrorbook.devstack.stack import DevStack

    work = Path(args.stack_dir)
    stack = DevStack(work / "stack")
    # 10,000 groups hold 1.49 M committed offsets in a group coordinator (and MM2's checkpoint task): the
    # devstack's 320 MB broker heap ran out committing them. At 1,000 groups the devstack's 384 MB Connect heap
    # holds, but only in back-to-back full collections (240 in 7 minutes, a core's worth): MM2 sized as for
    # its groups, as a deployment sizes it. A kept stack made smaller is restarted larger. At 10,000 groups a 2 GB
    # Connect ran out of heap as the checkpoint connector started again after a failover (2026-11-28: its task
    # loads every group's checkpoints).
    broker, connect = (320, 1024) if groups <= 1000 else (2048, 4096)
    made = stack.load()
    if made is not None and (made.settings.broker_heap_mb < broker or made.settings.connect_heap_mb < connect):
        stack.down()
    stack.up(StackSettings(mm2=Mm2Settings(**MM2), broker_heap_mb=broker, connect_heap_mb=connect))
    kept = json.loads((work / "scene.json").read_text()) if (work / "scene.json").exists() else None
    if kept is None:
        scene(stack, args.records, args.seed, groups)
        kept = {"records": args.records, "seed": args.seed, "groups": groups}
    elif kept.get("groups", 1000) < groups:
        commit_groups(stack, kept["seed"], kept.get("groups", 1000), groups)
        kept["groups"] = groups
    (work / "scene.json").write_text(json.dumps(kept))
    for old in work.glob("airflow-*"):
        shutil.rmtree(old)
    for old in [*work.glob("code-*"), *work.glob("audit-*.db")]:
        shutil.rmtree(old) if old.is_dir() else old.unlink()
    yield work, stack


def start_spark(stack: Any, driver_mb: int | None) -> dict[str, str]:
    """The stack's Spark Connect server (with `driver_mb` of driver memory), started and warmed as
    failover_rto.py does (a running server has paid its first query); its connection as environment variables
    for the children."""
    sys.path.insert(0, str(BENCH))
    from failover_rto import _spark_connect

    if driver_mb:
        stack.up(overrides={"spark": True, "spark_driver_memory_mb": driver_mb})
    return _spark_connect(stack)


def report_ours_only(results: dict[str, Any], n: int, fig: Callable[[str], float | None]) -> None:
    """The figures measured with our code only: through the real scheduler, and the seeded faults."""
    if (x := fig(f"scheduler/{n}")) is not None:
        print(f"RESULT failover_rto_s_scheduler_g{n}={x:.2f} s")
        if (y := fig(f"scheduler-proofs/{n}")) is not None:  # both runs on the one server, this run
            print(f"RESULT failover_rto_s_scheduler_proofs_g{n}={y:.2f} s")
            print(f"RESULT proof_rto_ratio_scheduler_g{n}={y / x:.2f}")
    seeded = results.get(f"seeded/{n}") or {}
    if "caught" in seeded:
        caught = sum(1 for said in seeded["caught"].values() if said)
        print(f"RESULT seeded_faults_caught_g{n}={caught} faults")
        print(f"RESULT seeded_faults_missed_g{n}={len(seeded['caught']) - caught} faults")
        print(f"RESULT seeded_faults_unseeded_failures_g{n}={sum(len(r) for r in seeded['others'].values())} rows")


def report(results: dict[str, Any], sizes: list[int], versions: list[str]) -> None:
    def fig(key: str, field: str = "rto_s") -> float | None:
        r = results.get(key) or {}
        return r.get(field) if "error" not in r and r.get("state", "success") == "success" else None

    for v in versions:
        tag = "" if v == "ours" else "_base"
        for n in sizes:
            for name, key in ((f"failover_rto_s{tag}_g{n}", f"failover/{v}/precise/off/{n}"),
                              (f"failover_rto_s_fresh{tag}_g{n}", f"failover/{v}/precise-fresh/off/{n}"),
                              (f"failover_rto_s_mm2{tag}_g{n}", f"failover/{v}/mm2/off/{n}"),
                              (f"failover_rto_s_proofs{tag}_g{n}", f"failover/{v}/precise/spark/{n}")):
                if (x := fig(key)) is not None:
                    print(f"RESULT {name}={x:.2f} s")
            bare, proved = fig(f"failover/{v}/precise/off/{n}"), fig(f"failover/{v}/precise/spark/{n}")
            if bare and proved:  # the proofs' price: RTO with them over RTO without, measured in this one run
                print(f"RESULT proof_rto_ratio{tag}_g{n}={proved / bare:.2f}")
            if v == versions[-1]:
                report_ours_only(results, n, fig)
            for label in ("precise", "precise-fresh"):
                plan = (results.get(f"failover/{v}/{label}/off/{n}") or {}).get("plan") or {}
                if plan.get("partitions"):
                    exact = sum(c for m, c in plan.get("methods", {}).items() if m.startswith("precise:"))
                    suffix = "" if label == "precise" else "_fresh"
                    print(f"RESULT precise_exact_share{suffix}{tag}_g{n}={exact / plan['partitions']:.4f}")
            if (x := fig(f"failover/{v}/precise/off/{n}", "translate_s")) is not None:
                print(f"RESULT translate_precise_s{tag}_g{n}={x:.2f} s")
            if (x := fig(f"failover/{v}/precise/off/{n}", "peak_rss_mb")) is not None:
                print(f"RESULT task_peak_rss_mb{tag}_g{n}={x:.0f} MB")
            h = results.get(f"health/{v}/{n}") or {}
            if "passes" in h:
                print(f"RESULT health_check_first_s{tag}_g{n}={h['passes'][0]['wall_s']:.2f} s")
                print(f"RESULT health_check_s{tag}_g{n}={h['passes'][-1]['wall_s']:.2f} s")
                print(f"RESULT health_check_requests{tag}_g{n}={h['passes'][-1]['requests']}")
        lo, hi = fig(f"failover/{v}/precise/off/{min(sizes)}"), fig(f"failover/{v}/precise/off/{max(sizes)}")
        if lo and hi and len(sizes) > 1:
            print(f"RESULT failover_growth_{max(sizes)}_over_{min(sizes)}{tag}={hi / lo:.2f}")


if __name__ == "__main__":
    sys.exit(main())
