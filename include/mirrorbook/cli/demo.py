"""`mirrorbook demo`: the local stack with real state, replicating, in one command (what `make demo` runs).

It starts (or reuses) the devstack with both flows and the Spark Connect server the parity proofs run
on, loads a workload on A — sequence-numbered records and consumer groups parked at telling positions —
waits until MM2 has mirrored everything and checkpointed the groups on B, then shows what a newcomer
needs to see: the KIP-1144 flows table, the replication lag per topic and the checkpoints, where the
Spark Connect server listens, and the commands to try next.

Running it again is safe: `devstack up` is a no-op on a running stack, existing topics are kept,
records are appended (the topics grow by the same amount each run) and the groups are re-parked
relative to the new ends.
"""

from __future__ import annotations

import asyncio
import argparse
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import AbstractSet, Any, Callable, Mapping, TypeVar

from mirrorbook.clients import Clients, cli_clients
from mirrorbook.connections import FileSource, Lookup
from mirrorbook.devstack import spark
from mirrorbook.devstack.paths import default_run_dir
from mirrorbook.devstack.stack import DevStack
from mirrorbook.devstack.workload import GroupSpec, LoadReport, load
from mirrorbook.errors import MirrorbookError
from mirrorbook.cli.flows import render as render_flows
from mirrorbook.mm2.flows import FlowState, FlowStatus
from mirrorbook.replication import all_status
from mirrorbook.mm2.internal_topics import CheckpointLog, InternalTopicMissing, read_checkpoints
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.topology import FlowSpec, Topology

T = TypeVar("T")

TOPIC_NAMES = ("orders", "payments", "shipments")
PARTITIONS = 3
RECORDS_PER_PARTITION = 2000
# name suffix -> where the group is parked (see workload.GroupSpec): the positions a failover must handle.
GROUP_POSITIONS = {
    "caught-up": "end",            # consumed everything
    "lagging-150": "end-150",      # behind by 150 records per partition
    "lagging-1000": "end-1000",    # far behind (more than offset.lag.max)
    "untouched": "begin",          # committed offset 0: has consumed nothing yet
}
# MM2 translates an offset only from an offset sync at or before it. Offset syncs are best effort (MM2
# drops some under load), so the one at offset 0 may be missing on a partition and then the untouched
# group gets no checkpoint there. The demo waits for the others and shows what MM2 did for this one.
CHECKPOINT_OPTIONAL = {"untouched"}


class DemoTimeout(MirrorbookError):
    pass


@dataclass(frozen=True)
class Workload:
    """The demo's topics and groups on cluster A, named from one prefix (tests use their own)."""

    prefix: str = "demo"
    records: int = RECORDS_PER_PARTITION

    @property
    def topics(self) -> list[str]:
        return [f"{self.prefix}-{t}" for t in TOPIC_NAMES]

    @property
    def groups(self) -> list[GroupSpec]:
        return [GroupSpec(name=f"{self.prefix}-{n}", position=p) for n, p in GROUP_POSITIONS.items()]

    @property
    def required_groups(self) -> set[str]:
        """Groups whose checkpoints the demo waits for (MM2 must be able to translate them)."""
        return {f"{self.prefix}-{n}" for n in GROUP_POSITIONS if n not in CHECKPOINT_OPTIONAL}

    def owns_group(self, group: str) -> bool:
        return any(group == g.name for g in self.groups)


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run-dir", help="devstack run dir (default: the per-user one `make down` stops)")
    p.add_argument("--prefix", default="demo", help="prefix of the demo's topics and groups (default demo)")
    p.add_argument("--records", type=int, default=RECORDS_PER_PARTITION,
                   help=f"records appended per partition on each run (default {RECORDS_PER_PARTITION})")
    p.add_argument("--timeout", type=float, default=180.0,
                   help="seconds to wait for replication and checkpoints (default 180)")
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir) if args.run_dir else default_run_dir()
    return run_demo(run_dir, Workload(prefix=args.prefix, records=args.records), timeout_s=args.timeout,
                    default_dir=args.run_dir is None)


def run_demo(run_dir: Path, workload: Workload, *, timeout_s: float = 180.0, default_dir: bool = False) -> int:
    stack = DevStack(run_dir)
    topology = start_stack(stack)
    flow = topology.flow("A->B")
    # The stack's topology file through the connections it wrote — its own, whatever AIRFLOW_CONN_* the shell holds
    # (another estate's): on a secured stack (`devstack up --secure`) the `mirrorbook` principal; the workload is
    # the `app` principal's.
    clients = cli_clients(str(stack.topology_path), topology, Lookup([FileSource(stack.connections_path)]))
    report = load_workload(clients, flow, workload, stack.require().kafka_config(flow.source, "app"))
    deadline = time.monotonic() + timeout_s
    statuses = wait_caught_up(clients, flow, workload, deadline, run_dir)
    checkpoints = wait_checkpoints(clients, flow, workload, report, deadline)
    print()
    print(render_flows(statuses))
    print()
    print(lag_table(statuses, flow, workload))
    print()
    print(checkpoint_table(checkpoints, flow, report))
    print()
    print(spark_connect_note(stack))
    print()
    print(next_steps(stack, workload, default_dir))
    return 0


# -- steps ------------------------------------------------------------------------------------------

def start_stack(stack: DevStack) -> Topology:
    """`devstack up --reverse --spark`: a no-op on a running stack, only what is missing otherwise."""
    t0 = time.monotonic()
    print(f"==> devstack in {stack.run_dir} (Kafka A and B, Connect + MM2 both ways, a Spark Connect server)",
          flush=True)
    result = stack.up(overrides={"reverse": True, "spark": True})
    if result["already_running"]:
        print("    already running: nothing to start", flush=True)
    else:
        print(f"    up in {time.monotonic() - t0:.0f}s (started: {', '.join(result['started']) or 'none'})", flush=True)
    return stack.require().topology()


def load_workload(clients: Clients, flow: FlowSpec, workload: Workload,
                  producer: str | Mapping[str, Any] | None = None) -> LoadReport:
    """Produce the workload and park its groups on the flow's source (as `producer`, default the clients')."""
    print(f"==> workload on {flow.source}: {len(workload.topics)} topics x {PARTITIONS} partitions, "
          f"{workload.records} records appended per partition", flush=True)
    existing = sorted(set(clients.admin(flow.source).topics()) & set(workload.topics))
    if existing:
        print(f"    {', '.join(existing)} exist from an earlier run: appending to them", flush=True)
    report = load(producer or clients.kafka_config(flow.source), workload.topics, PARTITIONS, workload.records,
                  workload.groups, origin="demo")
    for g in workload.groups:
        print(f"    group {g.name:<24} parked at {g.position}", flush=True)
    return report


def wait_until(check: Callable[[], tuple[T | None, str]], deadline: float, what: str, hint: str,
               interval_s: float = 1.0) -> T:
    """Poll `check` (-> (result or None, what is still missing)) until a result or the deadline."""
    while True:
        result, missing = check()
        if result is not None:
            return result
        if time.monotonic() > deadline:
            raise DemoTimeout(f"Timed out waiting for {what}; still missing: {missing}", hint)
        time.sleep(interval_s)


def wait_caught_up(clients: Clients, flow: FlowSpec, workload: Workload, deadline: float,
                   run_dir: Path) -> list[FlowStatus]:
    """Every flow REPLICATING and lag 0 on every partition of the demo topics of A->B."""
    print(f"==> waiting for {flow.name} to replicate the demo topics (lag 0)", flush=True)
    t0 = time.monotonic()
    wanted = {(t, p) for t in workload.topics for p in range(PARTITIONS)}

    def check() -> tuple[list[FlowStatus] | None, str]:
        statuses = asyncio.run(all_status(clients))
        problems = [f"{s.flow} is {s.state.value}" for s in statuses if s.state != FlowState.REPLICATING]
        main = next(s for s in statuses if s.flow == flow.name)
        lag = {(p.topic, p.partition): p.lag for p in main.lag if (p.topic, p.partition) in wanted}
        behind = sorted(f"{t}-{p}" for t, p in wanted if lag.get((t, p), 1) > 0)
        if behind:
            problems.append(f"lag on {', '.join(behind)}")
        return (None if problems else statuses), "; ".join(problems)

    statuses = wait_until(check, deadline, f"{flow.name} to catch up",
                          f"look at `mirrorbook devstack status --run-dir {shlex.quote(str(run_dir))}` and the logs "
                          f"in {run_dir / 'logs'}; or re-run with a larger --timeout")
    print(f"    caught up in {time.monotonic() - t0:.0f}s", flush=True)
    return statuses


def wait_checkpoints(clients: Clients, flow: FlowSpec, workload: Workload, report: LoadReport,
                     deadline: float) -> CheckpointLog:
    """Checkpoints on the target for every parked group and partition, at this run's parked offsets.

    Re-runs park groups further on, so old checkpoints do not count: the upstream offset must match.
    """
    print(f"==> waiting for MM2 checkpoints of the demo groups on {flow.target}", flush=True)
    t0 = time.monotonic()
    policy = ReplicationPolicy.for_flow(flow)
    expected = {(g, policy.format_remote_topic(flow.source, _topic(tp)), _partition(tp)): off
                for g, offs in report.groups.items() if g in workload.required_groups for tp, off in offs.items()}
    target = clients.kafka_config(flow.target)

    def check() -> tuple[CheckpointLog | None, str]:
        try:
            log = read_checkpoints(target, flow.source, policy=policy, group_filter=workload.owns_group)
        except InternalTopicMissing as exc:
            return None, exc.message
        missing = sorted(f"{g} {t}-{p}" for (g, t, p), off in expected.items()
                         if (cp := log.latest.get((g, t, p))) is None or cp.upstream_offset != off)
        return (None if missing else log), ", ".join(missing[:6]) + (f" (+{len(missing) - 6} more)"
                                                                     if len(missing) > 6 else "")

    log = wait_until(check, deadline, f"checkpoints of the demo groups on {flow.target}",
                     "MM2 emits checkpoints every emit.checkpoints.interval.seconds once the records are "
                     "mirrored; see `mirrorbook flows --partitions` and re-run with a larger --timeout", 2.0)
    print(f"    checkpointed in {time.monotonic() - t0:.0f}s", flush=True)
    return log


def _topic(tp: str) -> str:
    """Topic of a LoadReport key `topic-partition` (`str(TP)`); topic names may contain dashes."""
    return tp.rsplit("-", 1)[0]


def _partition(tp: str) -> int:
    return int(tp.rsplit("-", 1)[1])


# -- output -----------------------------------------------------------------------------------------

def _table(header: list[str], rows: list[list[object]], right: AbstractSet[int] = frozenset()) -> str:
    cells = [header] + [[str(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(v.rjust(w) if i in right else v.ljust(w) for i, (v, w) in enumerate(zip(r, widths)))
                     .rstrip() for r in cells)


def lag_table(statuses: list[FlowStatus], flow: FlowSpec, workload: Workload) -> str:
    """Replication lag per demo topic of the flow (summed over its partitions)."""
    status = next(s for s in statuses if s.flow == flow.name)
    rows = []
    for topic in workload.topics:
        parts = [p for p in status.lag if p.topic == topic]
        rows.append([f"{flow.source}:{topic}", f"{flow.target}:{parts[0].remote_topic if parts else '?'}",
                     len(parts), sum(p.high_watermark for p in parts), sum(p.lag for p in parts)])
    return f"Replication lag of {flow.name} per topic\n" + _table(
        ["SOURCE TOPIC", "TARGET TOPIC", "PARTITIONS", "RECORDS", "LAG"], rows, right={2, 3, 4})


def checkpoint_table(log: CheckpointLog, flow: FlowSpec, report: LoadReport) -> str:
    """The checkpoints MM2 wrote on the target: where each group would resume there after a failover.

    Partitions of a parked group without a checkpoint are listed too: that is what a failover must
    handle (mirrorbook reports them MISSING rather than guessing).
    """
    policy = ReplicationPolicy.for_flow(flow)
    rows = []
    for g, offs in sorted(report.groups.items()):
        for tp, off in sorted(offs.items(), key=lambda kv: (_topic(kv[0]), _partition(kv[0]))):
            key = (g, policy.format_remote_topic(flow.source, _topic(tp)), _partition(tp))
            cp = log.latest.get(key)
            rows.append([g, key[1], key[2], f"{cp.upstream_offset} -> {cp.downstream_offset}" if cp
                         else f"{off} -> (none: no offset sync at or before {off})"])
    return (f"Checkpoints on {flow.target} ({log.topic}): committed offset on {flow.source} -> offset to "
            f"resume from on {flow.target}\n"
            + _table(["GROUP", "TARGET TOPIC", "PARTITION", "UPSTREAM -> DOWNSTREAM"], rows, right={2}))


def spark_connect_note(stack: DevStack) -> str:
    """Where the stack's Spark Connect server listens and what it is for."""
    server = stack.require().spark
    assert server is not None  # start_stack asked for it
    pid = f", pid {server.process.pid}" if server.process else ""
    return "\n".join([
        f"Spark Connect server: {server.url} ({server.master_url}{pid})",
        "  kept warm for the parity proofs (group and record parity after each runbook step), so a proof",
        f"  costs no Spark start-up; the runbooks reach it through the Airflow connection {spark.CONN_ID},",
        f"  written to {stack.connections_path}",
    ])


def next_steps(stack: DevStack, workload: Workload, default_dir: bool) -> str:
    topo = shlex.quote(str(stack.topology_path))
    run_dir = "" if default_dir else f" --run-dir {shlex.quote(str(stack.run_dir))}"
    down = "make down" if default_dir else f"mirrorbook devstack down --purge{run_dir}"
    groups = shlex.quote(f"{workload.prefix}-.*")
    return "\n".join([
        "Try next:",
        f"  mirrorbook flows --topology {topo} --partitions",
        f"  mirrorbook translate --flow 'A->B' --groups {groups} --mode precise --topology {topo}",
        f"  mirrorbook devstack status{run_dir}",
        (f"  mirrorbook demo{run_dir}     # again: appends {workload.records} records per partition, "
         "re-parks the groups"),
        f"  {down}     # stop the stack and delete its data",
    ])
