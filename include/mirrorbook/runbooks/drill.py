"""dr_drill: a DR drill of one flow — a canary workload, a planned failover through mm2_failover's own
steps, the consumers resumed on the target, and proof by sequence numbers. One function per DAG task.

1. canary — on the flow's source: topics `<prefix>-t<i>` (created once, reused by later drills, so a
   production flow already replicates them) and this run's groups `<prefix>-<tag>-g<i>`, parked at the
   topics' ends. A producer writes `rate` records/s; the groups consume and commit (group 0 keeps up,
   the others read at half the rate and lag, as real consumers do). Every `sample_interval_s` a metrics
   sample (the health check's format) goes to the audit's history. Once `produce_s` is over and
   replication is steady (canary records on A not yet on B <= `steady_max_lag` for 3 samples in a
   row), the producer stops, then the consumers — their final commits are what they resume from.
   That moment is the cutover.
2. precheck, 3. wait_drained (the canary topics), 4. translate, 5. write_offsets, 6. verify,
   7. stop_flow — `runbooks.move` / `runbooks.failover` functions, with the groups of this run only.
8. resume_on_target — the same groups consume the remote topics on B from the written offsets to B's end.
   re-read = records read on B the group had already read on A; skipped = records after its position
   on A that it never read on B (must be 0). RTO = cutover -> every group consuming on B.
9. restore — `restore_after` (default): the flow is started again if it was running before the drill
   (it was: precheck requires it); `cleanup` (default): the drill's groups are deleted on both
   clusters. Without `restore_after` the flow stays STOPPED and the report says so.
10. report — JSON summary + HTML with charts in the artifacts dir, listed in the audit (`drill-report`).

The cutover stops the WHOLE flow (a drill is a real switchover of its replication); only the canary
groups move. Replication of the other topics resumes at restore.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from datetime import datetime, timedelta, timezone
from functools import partial
from typing import Any, Callable

from pydantic import BaseModel, Field

from mirrorbook.clients import Clients
from mirrorbook.errors import GateRefused, MirrorbookError
from mirrorbook.kafka.types import TP
from mirrorbook.mm2 import Translation
from mirrorbook.mm2.flows import FlowStatus
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.replication import backend_for
from mirrorbook.reports.drill_report import (ARTIFACT_KIND, DrillSummary, LagBeforeCutover, LagPoint,
                                             PartitionOutcome, StepTiming, write_report)
from mirrorbook.runbooks import failover, move as moves, move_report
from mirrorbook.runbooks.checks import describe_behind, drain_lag, drained, not_drained
from mirrorbook.runbooks.drill_canary import CanaryConsumer, CanaryProducer, GroupRead
from mirrorbook.core.engine import Runbook
from mirrorbook.runbooks.health.results import known_loss
from mirrorbook.runbooks.files import artifacts_dir, safe_name
from mirrorbook.runbooks.intents import GroupOffsets, GroupsAbsent, TopicsExist
from mirrorbook.runbooks.params import FailoverParams, FlowParams, parse
from mirrorbook.runbooks.plan import TranslationPlan
from mirrorbook.topology import FlowSpec, Topology

DRILL_SOURCE = "dr_drill"
CANARY_KEY, RESUME_KEY, RESTORE_KEY = "drill.canary", "drill.resume", "drill.restore"
STEADY_SAMPLES = 3
CONSUMER_GRACE_S = 0.5


class DrillFailed(MirrorbookError):
    pass


WAIT_MAX_S = 3600  # the longest of each of the drill's own waits a form accepts


class DrillParams(FlowParams):
    """The dr_drill form."""

    translation: Translation = Field(
        "precise", title="Offset translation",
        description="precise: the exact next record, proven by content; mm2: MM2's checkpoints")
    topics: int = Field(2, ge=1, le=20, title="Canary topics")
    partitions: int = Field(3, ge=1, le=64, title="Partitions per canary topic")
    groups: int = Field(2, ge=1, le=20, title="Canary consumer groups")
    rate: float = Field(200.0, gt=0, le=50_000, title="Records per second",
                        description="canary records per second, over all partitions")
    produce_s: float = Field(10.0, ge=1, le=WAIT_MAX_S, title="Produce for (s)")
    steady_max_lag: int | None = Field(None, ge=0, title="Steady when at most (records) behind",
                                       description="canary records on the source not yet on the target; "
                                                   "empty: one second of production")
    steady_timeout_s: float = Field(120.0, gt=0, le=WAIT_MAX_S, title="Steady timeout (s)")
    drain_timeout: int = Field(300, ge=0, le=WAIT_MAX_S, title="Drain timeout (s)")
    max_lag: int = Field(0, ge=0, title="Max lag when drained (records)")
    resume_timeout_s: float = Field(120.0, gt=0, le=WAIT_MAX_S, title="Resume timeout (s)")
    sample_interval_s: float = Field(1.0, gt=0, le=60, title="Lag sample interval (s)")
    restore_after: bool = Field(True, title="Restore the flow afterwards",
                                description="start the flow again once the drill is over")
    cleanup: bool = Field(True, title="Delete the drill's groups afterwards")
    topic_prefix: str = Field("mirrorbook-drill", pattern=r"^[A-Za-z0-9._-]{1,100}$", title="Canary topic prefix",
                              description="must be replicated by the flow")

    @property
    def steady_lag(self) -> int:
        return self.steady_max_lag if self.steady_max_lag is not None else max(1, math.ceil(self.rate))

    # -- names: fixed canary topics, per-run groups (every task derives them from the run id) --------
    def canary_topics(self) -> list[str]:
        return [f"{self.topic_prefix}-t{i}" for i in range(self.topics)]

    def group_prefix(self, run_id: str) -> str:
        return f"{self.topic_prefix}-{hashlib.sha1(run_id.encode()).hexdigest()[:8]}-g"

    def canary_groups(self, run_id: str) -> list[str]:
        return [f"{self.group_prefix(run_id)}{i}" for i in range(self.groups)]

    def move(self, run_id: str, topology: Topology) -> moves.Move:
        """mm2_failover's planned move of this run's canary groups only."""
        fp = parse(FailoverParams, {"flow": self.flow, "mode": "planned", "translation": self.translation,
                                    "groups": re.escape(self.group_prefix(run_id)) + r"\d+",
                                    "drain_timeout": self.drain_timeout, "max_lag": self.max_lag}, topology)
        return moves.failover_move(fp, topology)


# -- what the tasks hand each other (the audit's run progress, not XCom) ------------------------------

class Position(BaseModel):
    group: str
    tp: str  # "topic-partition" on the source
    offset: int


class CanaryState(BaseModel):
    topics: list[str]
    groups: list[str]
    start: dict[str, int]      # source partition -> first seq of this drill
    a_high: dict[str, int]     # source partition -> high watermark at the cutover
    a_next: list[Position]     # each group's committed offset on the source at the cutover
    started_at: datetime
    steady_at: datetime | None
    cutover_at: datetime
    produced: int
    consumed_on_a: int
    lag_before: LagBeforeCutover
    flow_state_before: str
    problems: list[str] = Field(default_factory=list)


class ResumeState(BaseModel):
    resumed_at: datetime | None
    outcomes: list[PartitionOutcome]
    consumed_on_b: int
    problems: list[str] = Field(default_factory=list)


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _canary(rb: Runbook) -> CanaryState | None:
    kept = rb.progress_get(CANARY_KEY)
    return CanaryState.model_validate(kept) if kept else None


def _require_canary(rb: Runbook) -> CanaryState:
    canary = _canary(rb)
    if canary is None:
        raise GateRefused("This drill run has no canary state: the canary task did not complete",
                          "clear and re-run the canary task")
    return canary


# -- sampling: the lag the report charts, in the health check's sample format -------------------------

class Sampler:
    """Records the flow's status plus the canary backlog (records on the source not yet on the target)."""

    def __init__(self, rb: Runbook, clients: Clients, flow: FlowSpec, tps: list[TP]) -> None:
        self.rb, self.clients, self.flow, self.tps = rb, clients, flow, tps
        policy = ReplicationPolicy.for_flow(flow)
        self.remote = {tp: TP(policy.format_remote_topic(flow.source, tp.topic), tp.partition) for tp in tps}

    def backlog(self) -> int:
        src = self.clients.admin(self.flow.source).high_watermarks(self.tps)
        dst_admin = self.clients.admin(self.flow.target)
        present = set(dst_admin.topics())
        dst = dst_admin.high_watermarks([r for r in self.remote.values() if r.topic in present])
        return sum(max(0, src[tp] - dst.get(self.remote[tp], 0)) for tp in self.tps)

    def sample(self) -> tuple[int, FlowStatus]:
        status = backend_for(self.clients, self.flow).status()
        backlog = self.backlog()
        self.rb.audit.record_metrics(self.flow.name, _now(), {**status.metrics(), "source": DRILL_SOURCE,
                                                              "run_id": self.rb.info.run_id, "canary_backlog": backlog})
        return backlog, status


def _lag_before(backlog: int, status: FlowStatus) -> LagBeforeCutover:
    lag = drain_lag(status)
    return LagBeforeCutover(canary_backlog=backlog, flow_lag=sum(lag.values()),
                            flow_max_partition_lag=max(lag.values(), default=0))


# -- 1. canary -------------------------------------------------------------------------------------

def unreplicated(clients: Clients, flow: FlowSpec, topics: list[str]) -> list[str]:
    """Canary topics the flow's `topics`/`topics.exclude` settings would not replicate."""
    include, exclude = backend_for(clients, flow).replicated_topics_filter()
    try:
        inc = re.compile("|".join(p.strip() for p in include.split(",") if p.strip()) or "(?!)")
        exc = re.compile("|".join(p.strip() for p in exclude.split(",") if p.strip()) or "(?!)")
    except re.error:
        return []  # a Java-only regex: MM2 will tell, by never replicating (the steady wait then fails)
    return [t for t in topics if not inc.fullmatch(t) or exc.fullmatch(t)]


def run_canary(rb: Runbook, clients: Clients, topology: Topology, params: DrillParams) -> dict[str, Any]:
    flow = params.flow_spec
    with rb.step("drill.canary", flow.name) as step:
        kept = _canary(rb)
        if kept:  # a re-run of a completed canary: the cutover happened, keep its evidence
            step.note(reused=f"canary of this run completed at {kept.cutover_at.isoformat()}")
            return kept.model_dump(mode="json")
        topics, groups = params.canary_topics(), params.canary_groups(rb.info.run_id)
        missing = unreplicated(clients, flow, topics)
        if missing:
            raise GateRefused(f"Flow {flow.name} does not replicate the canary topic(s) {', '.join(missing)} "
                              "(its source connector's topics/topics.exclude)",
                              "add them to the flow's `topics`, or pick a `topic_prefix` it replicates")
        before = backend_for(clients, flow).status()
        admin = clients.admin(flow.source)
        step.observe({"flow_state": before.state.value, "topics": topics, "groups": groups})
        missing = sorted(set(topics) - set(admin.topics()))
        if missing:
            step.mutate("topics.create", lambda: admin.create_topics({t: params.partitions for t in missing}),
                        method="CreateTopics", path=f"kafka://{flow.source}/topics",
                        body={"topics": missing, "partitions": params.partitions},
                        precondition="the drill's canary topics do not exist yet",
                        expect=TopicsExist(cluster=flow.source, topics=missing))
        tps = admin.partitions(topics)
        start = admin.high_watermarks(tps)
        step.mutate("groups.alter_offsets", lambda: _park(admin, groups, start), method="AlterConsumerGroupOffsets",
                    path=f"kafka://{flow.source}/groups", body={"groups": groups, "partitions": len(tps)},
                    precondition="this run's new canary groups start at the topics' ends",
                    expect=GroupOffsets.of(flow.source, {g: start for g in groups}))
        state = _produce_and_consume(rb, clients, flow, params, tps, start, groups, before.state.value)
        rb.progress_set(CANARY_KEY, state.model_dump(mode="json"))
        step.settle({"produced": state.produced, "consumed": state.consumed_on_a,
                     "cutover_at": state.cutover_at.isoformat(), "lag_before": state.lag_before.model_dump()})
        if state.problems:
            raise DrillFailed("The canary workload failed: " + "; ".join(state.problems))
    return state.model_dump(mode="json")


def _park(admin: Any, groups: list[str], at: dict[TP, int]) -> None:
    failed = {g: r for g, r in admin.alter_group_offsets({g: at for g in groups}).items()
              if any(e != "OK" for e in r.values())}
    if failed:
        raise DrillFailed(f"Could not park the canary groups at the topics' ends: {failed}")


def _produce_and_consume(rb: Runbook, clients: Clients, flow: FlowSpec, params: DrillParams, tps: list[TP],
                         start: dict[TP, int], groups: list[str], flow_state_before: str) -> CanaryState:
    config, topics = clients.kafka_config(flow.source), sorted({tp.topic for tp in tps})
    sampler = Sampler(rb, clients, flow, tps)
    producer = CanaryProducer(config, tps, start, params.rate)
    consumers = [CanaryConsumer(config, g, topics, max_rate=None if i == 0 else params.rate / 2) for i, g in
                 enumerate(groups)]
    started_at, t0 = _now(), time.monotonic()
    try:
        for c in consumers:
            c.start()
        producer.start()
        steady_in_a_row, steady_at = 0, None
        while True:
            backlog, status = sampler.sample()
            steady_in_a_row = steady_in_a_row + 1 if backlog <= params.steady_lag else 0
            if steady_in_a_row >= STEADY_SAMPLES and steady_at is None:
                steady_at = _now()
            elapsed = time.monotonic() - t0
            if elapsed >= params.produce_s and steady_in_a_row >= STEADY_SAMPLES:
                break
            if elapsed >= params.produce_s + params.steady_timeout_s:
                raise GateRefused(f"Replication of the canary never became steady: {backlog} record(s) on "
                                  f"{flow.source} not yet on {flow.target} (steady_max_lag={params.steady_lag}) after "
                                  f"{elapsed:.0f}s", "check the flow's health (mm2_health_check), lower `rate`, "
                                                     "or raise `steady_max_lag`/`steady_timeout_s`")
            broken = [e for c in consumers for e in c.read.errors] + producer.errors[:3]
            if broken:
                raise DrillFailed("The canary workload failed while producing: " + "; ".join(broken[:5]))
            time.sleep(params.sample_interval_s)
        lag_before = _lag_before(backlog, status)
        producer.stop()
        time.sleep(CONSUMER_GRACE_S)
    finally:
        producer.halt()
        reads = [c.stop() for c in consumers]
    cutover_at = _now()
    admin = clients.admin(flow.source)
    committed = admin.committed_offsets(groups)
    high = admin.high_watermarks(tps)
    problems = [f"{r.group}: {e}" for r in reads for e in r.errors]
    problems += [f"{r.group} read {tp} out of order ({p.offset_mismatch} record(s) whose seq is not their offset)"
                 for r in reads for tp, p in r.reads.items() if p.offset_mismatch]
    return CanaryState(topics=topics, groups=groups, start={str(tp): o for tp, o in start.items()},
                       a_high={str(tp): o for tp, o in high.items()},
                       a_next=[Position(group=g, tp=str(tp), offset=committed.get(g, {}).get(tp, start[tp]))
                               for g in groups for tp in tps],
                       started_at=started_at, steady_at=steady_at, cutover_at=cutover_at,
                       produced=sum(high[tp] - start[tp] for tp in tps), consumed_on_a=sum(r.count for r in reads),
                       lag_before=lag_before, flow_state_before=flow_state_before, problems=problems)


# -- 2..7. the failover, by mm2_failover's own steps ----------------------------------------------

def precheck(rb: Runbook, clients: Clients, topology: Topology, params: DrillParams) -> dict[str, Any]:
    _require_canary(rb)
    return moves.precheck(rb, clients, params.move(rb.info.run_id, topology)).model_dump(mode="json")


def wait_drained(rb: Runbook, clients: Clients, topology: Topology, params: DrillParams) -> dict[str, Any]:
    """The canary topics replicated to within `max_lag` (other topics may keep flowing: not waited for)."""
    canary = _require_canary(rb)
    flow = params.flow_spec
    with rb.step("drill.wait_drained", flow.name) as step:
        sampler = Sampler(rb, clients, flow, [TP.parse(t) for t in canary.start])
        t0 = time.monotonic()
        while True:
            _, status = sampler.sample()
            ok, behind = drained(status, params.max_lag, set(canary.topics))
            if ok:
                break
            if time.monotonic() - t0 >= params.drain_timeout:
                if status.unreadable is not None:  # the cause first
                    raise GateRefused(not_drained(status, behind, params.max_lag, params.drain_timeout),
                                      status.unreadable.fix or "check the flow's health")
                raise GateRefused(f"The canary topics did not drain within {params.drain_timeout}s: "
                                  f"{describe_behind(behind)} (max_lag={params.max_lag})",
                                  "check the flow's health; raise drain_timeout")
            time.sleep(params.sample_interval_s)
        step.settle({"drained": True, "waited_s": round(time.monotonic() - t0, 3)})
    return step.outcome.model_dump(mode="json")


def translate(rb: Runbook, clients: Clients, topology: Topology, params: DrillParams) -> dict[str, Any]:
    plan = moves.translate(rb, clients, params.move(rb.info.run_id, topology), failover.compute_plan)
    return plan.totals()


def write_offsets(rb: Runbook, clients: Clients, topology: Topology, params: DrillParams) -> dict[str, Any]:
    move = params.move(rb.info.run_id, topology)
    return moves.write_offsets(rb, clients, move, moves.load_offsets(rb)).model_dump(mode="json")


def verify(rb: Runbook, clients: Clients, topology: Topology, params: DrillParams) -> dict[str, Any]:
    move = params.move(rb.info.run_id, topology)
    return moves.verify_offsets(rb, clients, move, moves.load_offsets(rb)).model_dump(mode="json")


def stop_flow(rb: Runbook, clients: Clients, topology: Topology, params: DrillParams) -> dict[str, Any]:
    move = params.move(rb.info.run_id, topology)
    return {"steps": [o.model_dump(mode="json") for o in moves.stop_flow(rb, clients, move, move.via)]}


# -- 8. consumers resume on the target ------------------------------------------------------------

def prove(a_next: int, a_high: int, seqs: list[int]) -> tuple[int, int, int]:
    """(re-read, skipped, duplicates) of a partition, from the seqs read on B: every record from the
    group's position on A up to the end must have been read; anything before it was read again."""
    read = set(seqs)
    return (sum(1 for s in read if s < a_next), sum(1 for s in range(a_next, a_high) if s not in read),
            len(seqs) - len(read))


def resume_on_target(rb: Runbook, clients: Clients, topology: Topology, params: DrillParams) -> dict[str, Any]:
    canary = _require_canary(rb)
    flow, plan = params.flow_spec, moves.load_plan(rb)
    policy = ReplicationPolicy.for_flow(flow)
    with rb.step("drill.resume_on_target", flow.name) as step:
        remote = {TP.parse(t): TP(policy.format_remote_topic(flow.source, TP.parse(t).topic), TP.parse(t).partition)
                  for t in canary.start}
        admin = clients.admin(flow.target)
        ends = admin.high_watermarks(remote.values())
        start = admin.committed_offsets(canary.groups)  # the offsets the failover wrote
        config = clients.kafka_config(flow.target)
        topics = sorted({r.topic for r in remote.values()})
        consumers = [CanaryConsumer(config, g, topics, seq_is_offset=False, keep_seqs=True, reset="error",
                                    ends={tp: e for tp, e in ends.items() if start.get(g, {}).get(tp, 0) < e})
                     for g in canary.groups]
        for c in consumers:
            c.start()
        deadline = time.monotonic() + params.resume_timeout_s
        for c in consumers:
            c.wait(max(0.0, deadline - time.monotonic()))
        late = [c.read.group for c in consumers if not c.done.is_set()]
        reads = {c.read.group: c.stop() for c in consumers}
        state = _resume_state(canary, plan, remote, reads, late)
        rb.progress_set(RESUME_KEY, state.model_dump(mode="json"))
        step.settle({"resumed_at": state.resumed_at.isoformat() if state.resumed_at else None,
                     "consumed": state.consumed_on_b, "skipped": sum(o.skipped for o in state.outcomes),
                     "re_read": sum(o.re_read for o in state.outcomes)})
        if state.problems:
            raise DrillFailed(f"Consumers resumed on {flow.target} with problems: " + "; ".join(state.problems[:5]))
    return state.model_dump(mode="json")


def _resume_state(canary: CanaryState, plan: Any, remote: dict[TP, TP], reads: dict[str, GroupRead],
                  late: list[str]) -> ResumeState:
    written = plan.offsets()
    a_next = {(p.group, p.tp): p.offset for p in canary.a_next}
    outcomes, problems = [], [f"{g} did not reach the end of the remote topics in time" for g in late]
    for g, r in reads.items():
        problems += [f"{g}: {e}" for e in r.errors]
        for src, dst in sorted(remote.items()):
            got = r.reads.get(dst)
            seqs = got.seqs if got else []
            nxt, high = a_next[(g, str(src))], canary.a_high[str(src)]
            re_read, skipped, dups = prove(nxt, high, seqs)
            outcomes.append(PartitionOutcome(group=g, source_topic=src.topic, target_topic=dst.topic,
                                             partition=src.partition, a_next=nxt, a_high=high,
                                             b_offset=written.get(g, {}).get(dst),
                                             b_first_seq=got.first_seq if got else None, read_on_b=len(seqs),
                                             re_read=re_read, skipped=skipped, duplicates=dups))
    skipped = sum(o.skipped for o in outcomes)
    if skipped:
        problems.append(f"{skipped} record(s) skipped: " + ", ".join(
            f"{o.group} {o.source_topic}-{o.partition} ({o.skipped})" for o in outcomes if o.skipped)[:500])
    times = [t for r in reads.values() if (t := r.first_record_at or r.assigned_at) is not None]
    resumed = max(times) if times and len(times) == len(reads) else None  # once every read has started
    return ResumeState(resumed_at=resumed, outcomes=outcomes, consumed_on_b=sum(r.count for r in reads.values()),
                       problems=problems)


# -- 9. restore ------------------------------------------------------------------------------------

def restore(rb: Runbook, clients: Clients, topology: Topology, params: DrillParams) -> dict[str, Any]:
    """Put the flow back as the drill found it (and remove the drill's groups), or say that it did not."""
    flow, canary = params.flow_spec, _canary(rb)
    if canary is None:
        outcome = "nothing to restore: the canary never ran, the flow was not touched"
    elif not params.restore_after:
        outcome = f"restore_after=false: flow {flow.name} left as the drill left it"
    elif canary.flow_state_before == "DISABLED":
        outcome = f"flow {flow.name} was DISABLED before the drill: left as it is"
    else:
        moves.start_flow(rb, clients, flow)
        outcome = f"flow {flow.name} started again"
    if params.cleanup and canary:
        _delete_groups(rb, clients, flow, canary.groups)
        outcome += "; canary groups deleted on both clusters"
    # A flow just started again runs its source task only once Connect has reassigned it: its state is judged
    # once that task is back (or after a bounded wait), not at the instant the resume returned.
    started = canary is not None and "started again" in outcome
    after = moves.settled_status(clients, flow, False, 30.0 if started else 0.0).state.value
    rb.progress_set(RESTORE_KEY, {"outcome": outcome, "flow_state_after": after})
    return {"outcome": outcome, "flow_state_after": after}


def _delete_groups(rb: Runbook, clients: Clients, flow: FlowSpec, groups: list[str]) -> None:
    with rb.step("drill.cleanup", flow.name) as step:
        for cluster in (flow.source, flow.target):
            admin = clients.admin(cluster)
            present = sorted(set(groups) & set(admin.list_groups()))
            if present:
                step.mutate("groups.delete", partial(admin.delete_groups, present), method="DeleteGroups",
                            path=f"kafka://{cluster}/groups", body={"groups": present},
                            precondition="the drill's own canary groups, stopped by the drill",
                            expect=GroupsAbsent(cluster=cluster, groups=present))


# -- 10. report ------------------------------------------------------------------------------------

def _steps(rb: Runbook) -> tuple[list[StepTiming], list[str]]:
    """Every step of the run as the audit recorded it, and the errors of those that failed."""
    events = [e for e in rb.audit.events(run_id=rb.info.run_id) if e.kind == "step"]
    steps = [StepTiming(step=e.action.removeprefix("step.") + (f" ({e.details['role']})" if "role" in e.details
                                                               else ""),
                        task_id=e.task_id, result=e.result, started_at=e.started_at, ended_at=e.ended_at)
             for e in events]
    return steps, [f"{s.step}: {e.error}" for s, e in zip(steps, events) if e.result in ("error", "refused")]


def _timeline(rb: Runbook, flow: FlowSpec, topics: set[str], since: datetime, until: datetime) -> list[LagPoint]:
    out = []
    for s in rb.audit.metrics(flow.name, since=since, until=until, newest_first=False):
        rows = [p for p in s.metrics.get("partitions", []) if not ReplicationPolicy().is_heartbeats_topic(p["topic"])]
        out.append(LagPoint(at=s.observed_at, flow_lag=sum(p["lag"] for p in rows),
                            canary_lag=sum(p["lag"] for p in rows if p["topic"] in topics),
                            canary_backlog=s.metrics.get("canary_backlog"), source=s.metrics.get("source")))
    return out


def summarize(rb: Runbook, topology: Topology, params: DrillParams) -> DrillSummary:
    flow, finished = params.flow_spec, _now()
    canary = _canary(rb)
    resume = rb.progress_get(RESUME_KEY)
    resume = ResumeState.model_validate(resume) if resume else None
    restored = rb.progress_get(RESTORE_KEY) or {}
    kept = rb.progress_get(moves.PLAN_KEY)
    plan = TranslationPlan.from_stored(kept, rows=False) if kept else None
    steps, problems = _steps(rb)
    s = DrillSummary(run_id=rb.info.run_id, flow=flow.name, from_cluster=flow.source, to_cluster=flow.target,
                     translation=params.translation, finished_at=finished, steps=steps,
                     plan=plan.totals() if plan else None, restored=restored.get("outcome", "not run"),
                     flow_state_after=restored.get("flow_state_after"), problems=problems,
                     known_loss=known_loss(rb.audit, flow.name))
    if canary:
        s.topics, s.groups = canary.topics, canary.groups
        s.started_at, s.steady_at = canary.started_at, canary.steady_at
        s.cutover_at, s.produced, s.consumed_on_a = canary.cutover_at, canary.produced, canary.consumed_on_a
        s.lag_before_cutover, s.flow_state_before = canary.lag_before, canary.flow_state_before
        s.lag_timeline = _timeline(rb, flow, set(canary.topics), canary.started_at - timedelta(seconds=5), finished)
        s.failover_s = move_report.move_report(rb, plan, canary.cutover_at)["rto_s"]
    if resume:
        s.partitions, s.resumed_at, s.consumed_on_b = resume.outcomes, resume.resumed_at, resume.consumed_on_b
        s.skipped = sum(o.skipped for o in resume.outcomes)
        s.re_read = sum(o.re_read for o in resume.outcomes)
        s.duplicates = sum(o.duplicates for o in resume.outcomes)
        if resume.resumed_at and s.cutover_at:
            s.rto_s = round((resume.resumed_at - s.cutover_at).total_seconds(), 3)
    if resume is None:
        s.problems.append("consumers were not resumed on " + flow.target + ": the drill did not complete")
    s.ok = not s.problems and s.skipped == 0 and s.rto_s is not None
    return s


def report(rb: Runbook, clients: Clients, topology: Topology, params: DrillParams) -> dict[str, Any]:
    """Write the JSON summary and the HTML report, list them in the audit; fail when the drill did not pass."""
    summary = summarize(rb, topology, params)
    html, data = write_report(summary, artifacts_dir(), f"drill-{safe_name(rb.info.run_id)}")
    rb.audit.record_artifact(ARTIFACT_KIND, rb.info.run_id, str(html), summary.artifact_summary(data))
    out = {**summary.artifact_summary(data), "html": str(html)}
    if not summary.ok:
        raise DrillFailed(f"Drill of {summary.flow} did not pass: " + "; ".join(summary.problems or ["incomplete"])
                          + f" (report: {html})")
    return out


STEPS: dict[str, Callable[[Runbook, Clients, Topology, DrillParams], dict[str, Any]]] = {
    "canary": run_canary, "precheck": precheck, "wait_drained": wait_drained, "translate": translate,
    "write_offsets": write_offsets, "verify": verify, "stop_flow": stop_flow, "resume_on_target": resume_on_target,
    "restore": restore, "report": report,
}

