"""Moving consumer groups between clusters: the steps failover and failback share.

precheck -> (planned: groups inactive, replication drained) -> translate -> write offsets -> verify
-> stop the flow -> optionally start the other direction -> report.

Translation differs (failback also translates topics that originated on the cluster it returns to),
so each direction supplies its own `translate`; everything else is here. The plan is computed once
and kept in the run's progress, the offsets are written only where the new cluster does not already
hold them, and every group must be EMPTY or absent there — so a cleared task re-runs to the same
end state without writing twice.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from typing import Any, Callable, cast

from mirrorbook.clients import Clients
from mirrorbook.bounds import cut, shown
from mirrorbook.errors import GateRefused, MirrorbookError, Verdict
from mirrorbook.kafka.admin import NO_OFFSETS, KafkaAdmin
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.counts import total
from mirrorbook.mm2.internal_topics import read_checkpoints
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.mm2.remote_cluster_utils import group_matcher
from mirrorbook.replication import backend_for
from mirrorbook.runbooks import unplanned
from mirrorbook.runbooks.checks import drain_lag
from mirrorbook.core.engine import Mutation, Runbook, StepOutcome
from mirrorbook.runbooks.intents import GroupOffsets
from mirrorbook.runbooks.params import FailbackParams, FailoverParams, InvalidParams, MoveParams, Preflight
from mirrorbook.runbooks.plan import INTERNAL_GROUPS, PlannedOffsets, TranslationPlan, managed_groups
from mirrorbook.topology import FlowSpec, Topology

PLAN_KEY = "plan"
FLOW_STOPPED_KEY = "flow_stopped_at"  # this run stopped the flow the groups left (its gates expect it stopped)
PING_TIMEOUT_S = 5.0
UNPLANNED_PING_S = 2.0


class VerifyFailed(Verdict):
    pass


@dataclass(frozen=True)
class Move:
    """Who moves where: groups leave `from_cluster` for `to_cluster`; `via` replicates their data."""

    direction: str           # "failover" | "failback"
    flow: FlowSpec           # the flow the operator named (A->B)
    via: FlowSpec            # the flow whose replication carries the groups' data
    from_cluster: str
    to_cluster: str
    params: FailoverParams | FailbackParams
    regex: str

    @property
    def planned(self) -> bool:
        return self.params.mode == "planned"

    @property
    def name(self) -> str:
        return f"{self.direction} {self.from_cluster}->{self.to_cluster}"


def failover_move(params: FailoverParams, topology: Topology) -> Move:
    flow = params.flow_spec
    return Move("failover", flow, flow, flow.source, flow.target, params, params.groups_regex(topology))


def failback_move(params: FailbackParams, topology: Topology) -> Move:
    flow = params.flow_spec
    reverse = topology.reverse_of(flow)
    assert reverse is not None
    return Move("failback", flow, reverse, flow.target, flow.source, params, params.groups_regex(topology))


def move_for(params: MoveParams, topology: Topology) -> Move:
    """The move a runbook's validated parameters describe (their model says which direction)."""
    if isinstance(params, FailbackParams):
        return failback_move(params, topology)
    if isinstance(params, FailoverParams):
        return failover_move(params, topology)
    raise TypeError(f"{type(params).__name__} describes no move: FailoverParams or FailbackParams")


def other_flow(move: Move, topology: Topology) -> FlowSpec | None:
    """The flow the run starts once the groups have moved, if it was asked to: a failover's reverse flow
    (`start_reverse_flow`), a failback's original flow (`restart_flow`)."""
    if isinstance(move.params, FailoverParams):
        return topology.reverse_of(move.flow) if move.params.start_reverse_flow else None
    return move.flow if move.params.restart_flow else None


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _mark(rb: Runbook, key: str, at: datetime | None = None) -> None:
    """Record when a milestone of the run was first reached (`at`, else now; RTO is measured from these)."""
    if not rb.dry_run and not rb.progress_get(key):
        rb.progress_set(key, (at or _now()).isoformat())


def reachable(admin: KafkaAdmin, timeout_s: float = PING_TIMEOUT_S) -> bool:
    return admin.ping(timeout_s=timeout_s)


def reachability(clients: Clients, move: Move) -> dict[str, bool]:
    """Both clusters pinged side by side. The cluster an unplanned move leaves is presumed gone: it gets a short,
    stated timeout (UNPLANNED_PING_S), so a dead cluster costs the cutover seconds, not a client default."""
    timeouts = {move.to_cluster: PING_TIMEOUT_S,
                move.from_cluster: PING_TIMEOUT_S if move.planned else UNPLANNED_PING_S}
    with ThreadPoolExecutor(max_workers=2) as pool:
        found = {c: pool.submit(reachable, clients.admin(c), t) for c, t in timeouts.items()}
        return {c: f.result() for c, f in found.items()}


def groups_to_move(rb: Runbook, clients: Clients, move: Move, from_reachable: bool) -> list[str]:
    """Planned: the matching groups on the cluster being left. Unplanned: every group the target side still
    knows of — MM2's checkpoints and the health check's readiness positions."""
    if from_reachable and move.planned:
        return managed_groups(clients.admin(move.from_cluster), move.regex)
    if move.direction == "failover":
        return unplanned.known_groups(unplanned.survivors(clients, rb.audit, move.via, move.regex))
    matches = group_matcher(move.regex)
    log = read_checkpoints(clients.kafka_config(move.to_cluster), move.via.source,
                           policy=ReplicationPolicy.for_flow(move.via), group_filter=matches)
    return sorted(g for g in log.groups() if not INTERNAL_GROUPS.match(g))


NOTHING_TO_MOVE_HINT = "check the `groups` parameter (a regex matched against whole group ids)"


def no_groups(move: Move) -> str:
    where = (f"on {move.from_cluster}" if move.planned else
             f"in what survives on {move.to_cluster} (MM2 checkpoints, readiness positions)")
    return f"No consumer group matches {shown(move.regex)} {where}"


def preflight(params: MoveParams, context: Preflight) -> list[str]:
    """A groups pattern that matches nothing on the cluster a planned move leaves: a real run is refused
    here, before the lock; a dry run plans on and says so (nothing to move is not an error there). An
    unplanned move finds its groups in what survives on the target: its precheck looks."""
    if params.mode != "planned":
        return []
    move = move_for(params, context.topology)
    admin = context.clients.admin(move.from_cluster)
    if not reachable(admin) or managed_groups(admin, move.regex):
        return []  # an unreachable cluster is precheck's to refuse, saying so
    if not params.dry_run:
        raise InvalidParams(no_groups(move), NOTHING_TO_MOVE_HINT)
    return [f"{no_groups(move)}: nothing to move — a real run with these parameters is refused"]


def precheck(rb: Runbook, clients: Clients, move: Move) -> StepOutcome:
    with rb.step(f"{move.direction}.precheck", move.flow.name) as step:
        src, dst = clients.admin(move.from_cluster), clients.admin(move.to_cluster)
        reach = reachability(clients, move)
        step.note(reachable=reach, mode=move.params.mode, groups_regex=move.regex, via=move.via.name)
        if not reach[move.to_cluster]:
            raise GateRefused(f"Cluster {move.to_cluster} is unreachable: there is nothing to {move.direction} to",
                              "restore connectivity to it first")
        if move.planned and not reach[move.from_cluster]:
            raise GateRefused(f"Cluster {move.from_cluster} is unreachable, and a planned {move.direction} needs it "
                              "(to stop consumers, drain replication and read committed offsets)",
                              f"use mode=unplanned to {move.direction} from {move.to_cluster} alone")
        resuming = has_plan(rb)
        stopped_at = rb.progress_get(FLOW_STOPPED_KEY)
        if stopped_at:
            step.note(own_stop=f"this run stopped {move.via.name} at {stopped_at}: it is expected stopped, "
                               "not waited for")
        # A re-run does not judge the flow (its plan stands), so it gives no source task time to come back.
        status = settled_status(clients, move.via, reach[move.from_cluster],
                                 wait_s=30.0 if move.planned and not resuming and not stopped_at else 0.0)
        if resuming:
            step.note(resuming="this run already has a plan: re-checking reachability only")
            step.settle({"flow_state": status.state.value, "resumed": True})
            return step.outcome
        if move.planned and not stopped_at and not status.detailed_state.source_task_running:
            # `describe` leads with the cause when the flow could not be read (then its fix is the one to make).
            if status.unreadable is not None:
                raise GateRefused(f"{status.describe()}. A planned {move.direction} must see replication drain, so it "
                                  "is refused before anything changed",
                                  status.unreadable.fix or f"make {move.via.name}'s Connect cluster readable, or use "
                                                           "mode=unplanned")
            raise GateRefused(f"{status.describe()}. Replication cannot drain, so a planned move would lose what is "
                              "not replicated yet",
                              f"resume it (mm2_pause_resume flow={move.via.name} action=resume), or use mode=unplanned")
        groups = groups_to_move(rb, clients, move, reach[move.from_cluster])
        if not groups and not rb.dry_run:
            raise GateRefused(no_groups(move), NOTHING_TO_MOVE_HINT)
        if not groups:  # a dry run shows the rest of its plan, and this warning in it
            step.note(warning=f"{no_groups(move)}: nothing to move — a real run with these parameters is refused")
        # Writing a group's offsets on the target takes READ on the group: a principal without it is refused
        # here, naming the groups, before anything is written — so the target's groups are each described (their
        # authorized operations); the source's states come from its group listing, side by side.
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="describe") as pool:
            on_src = pool.submit(src.group_states, groups) if reach[move.from_cluster] and groups else None
            on_dst = dst.describe_groups(groups, need="READ")
            active = {g: i for g, i in on_dst.items() if not i.inactive}
            if active:
                raise _active_refusal(active, move.to_cluster)
            from_states = {g: i.state for g, i in on_src.result().items()} if on_src is not None else {}
        lag = drain_lag(status)
        rb.progress_set("groups", groups)
        step.settle({"flow_state": status.state.value, "groups": groups, "from_states": from_states,
                     "lag_total": sum(lag.values()), "lag_partitions": len(lag)})
    return step.outcome


def settled_status(clients: Clients, flow: FlowSpec, with_lag: bool, wait_s: float) -> Any:
    """The flow's status, giving a source task that is being reassigned (MM2 reconfigures its tasks
    when topics appear) up to `wait_s` to come back before judging."""
    deadline = time.monotonic() + wait_s
    while True:
        status = backend_for(clients, flow).status(with_lag=with_lag)
        refused = status.unreadable is not None and status.unreadable.refused  # asking again cannot help
        if status.detailed_state.source_task_running or refused or time.monotonic() >= deadline:
            return status
        time.sleep(1.0)


def _active_refusal(active: dict[str, Any], cluster: str) -> GateRefused:
    names = ", ".join(f"{g} ({i.state}, {i.members} member{'s' if i.members != 1 else ''}"
                      + (f" on {', '.join(sorted(set(i.member_hosts)))}" if i.member_hosts else "") + ")"
                      for g, i in sorted(active.items()))
    return GateRefused(f"Consumer group(s) active on {cluster}: {names}. Offsets are only written to groups that "
                       f"are EMPTY or absent there; nothing was written.",
                       f"stop those consumers on {cluster}, then clear and re-run this task")


def translate(rb: Runbook, clients: Clients, move: Move,
              compute: Callable[[Runbook, Clients, Move, list[str]], TranslationPlan]) -> TranslationPlan:
    """Compute the plan once per run; a re-run of this task (or a later one) reuses it."""
    with rb.step(f"{move.direction}.translate", move.flow.name) as step:
        kept = rb.progress_get(PLAN_KEY)
        if kept:
            plan = TranslationPlan.from_stored(kept, rows=False)
            step.note(reused=f"plan computed at {plan.computed_at.isoformat()}")
        else:
            groups = rb.progress_get("groups") or groups_to_move(
                rb, clients, move, move.planned and reachable(clients.admin(move.from_cluster)))
            t0 = time.monotonic()
            plan = compute(rb, clients, move, groups)
            if not groups:  # a dry run only: precheck refuses a real one
                plan.notes.insert(0, f"{no_groups(move)}: nothing to move — a real run with these parameters "
                                     "is refused")
            step.note(translate_s=round(time.monotonic() - t0, 3))
            skipping = plan.skipping()
            if skipping:
                skip = total(r.skip for r in skipping)
                bad = plan.skipping_text()
                step.note(skipping=[r.model_dump(mode="json") for r in skipping[:50]], skipped=str(skip))
                if not move.params.allow_skips:
                    # precise skips only what no position on the new cluster still holds (its retention deleted it)
                    accept = "to accept the loss, trigger the runbook again with allow_skips=true"
                    hint = (f"the records are gone from the new cluster (its retention deleted them): {accept}"
                            if plan.translation == "precise" else
                            f"use translation=precise (it skips only what the new cluster no longer holds) or, "
                            f"{accept}")
                    raise VerifyFailed(f"The plan would skip {skip} record(s) in {len(skipping)} group-partition(s): "
                                       f"{bad}. Nothing was written.", hint)
                allowed = (f"allow_skips=true: the operator accepted {skip} skipped record(s) in {len(skipping)} "
                           f"group-partition(s): {bad}")
                plan.notes.append(allowed)
                step.note(allowed_skips=allowed)
            rb.progress_set(PLAN_KEY, plan.stored())
        step.settle(plan.totals())
        step.note(groups=plan.groups, notes=plan.notes)
    return plan


def _kept_plan(rb: Runbook) -> dict[str, Any]:
    kept: dict[str, Any] | None = rb.progress_get(PLAN_KEY)  # as TranslationPlan.stored() made it
    if not kept:
        raise GateRefused("No translation plan for this run: the translate task has not completed",
                          "clear and re-run the translate task first")
    return kept


def load_plan(rb: Runbook, *, rows: bool = True) -> TranslationPlan:
    """The run's plan; `rows=False`: column by column, no object per row (what a proof reads: `views`)."""
    return TranslationPlan.from_stored(_kept_plan(rb), rows=rows)


def load_offsets(rb: Runbook) -> PlannedOffsets:
    """The run's planned offsets alone: what writing and reading them back need (no row of the plan is made)."""
    return PlannedOffsets.from_stored(_kept_plan(rb))


def has_plan(rb: Runbook) -> bool:
    return rb.audit.progress_has(rb.info.run_id, PLAN_KEY)


def _alter(admin: KafkaAdmin, group: str, offsets: dict[TP, int]) -> dict[str, str]:
    # Checked idle in this step already; a consumer that joined since is refused by the broker with the write.
    result = admin.alter_group_offsets({group: offsets}, require_inactive=False).get(group, {})
    failed = {str(tp): err for tp, err in result.items() if err != "OK"}
    if failed:
        raise MirrorbookError(f"Writing offsets of group {group} on {admin.bootstrap} failed for {failed}")
    return {str(tp): "OK" for tp in result}


# Groups written side by side: each is its own call to its own coordinator, so a thousand groups cost about
# a thousand round trips / this, not a thousand in a row (the broker refuses a group that got members since).
# 64 against 16, side by side at 1,000 groups (benchmarks/failover_scale.py --baseline): write 3.1 s against 5.5 s.
GROUP_WRITES_AT_ONCE = 64


def write_offsets(rb: Runbook, clients: Clients, move: Move, plan: PlannedOffsets) -> StepOutcome:
    """Snapshot, then write only what differs, one group per call (side by side); active groups stop
    everything first."""
    with rb.step(f"{move.direction}.write_offsets", move.flow.name) as step:
        admin = clients.admin(plan.to_cluster)
        wanted = plan.offsets()
        every = admin.group_states(wanted)
        # A group the cluster does not know holds no offsets: only the others' are fetched, a request each (a
        # failover's groups are mostly new on the target; read side by side with their describes, a thousand
        # fetches took 1.1 s, measured).
        current: dict[str, dict[TP, int]] = {g: {} for g, i in every.items() if i.state in NO_OFFSETS}
        current.update(admin.committed_offsets([g for g in wanted if g not in current]))
        diff = {g: {tp: o for tp, o in offs.items() if current.get(g, {}).get(tp) != o} for g, offs in wanted.items()}
        diff = {g: d for g, d in diff.items() if d}
        # Only groups that still need offsets must be idle; a group already moved may be consuming by now.
        info = {g: every[g] for g in diff}
        active = {g: i for g, i in info.items() if not i.inactive}
        if active:
            raise _active_refusal(active, plan.to_cluster)
        step.observe({"groups": len(wanted), "groups_to_write": len(diff),
                      "partitions_to_write": sum(len(d) for d in diff.values())})
        if diff:
            step.snapshot("group-offsets", f"{plan.to_cluster}:consumer-groups",
                          {"cluster": plan.to_cluster, "groups": {g: {str(tp): o for tp, o in sorted(c.items())}
                                                                  for g, c in current.items() if g in wanted}},
                          note=f"committed offsets on {plan.to_cluster} before the {move.direction}")
        step.mutate_all([Mutation("groups.alter_offsets", partial(_alter, admin, g, diff[g]),
                                  method="AlterConsumerGroupOffsets", path=f"kafka://{plan.to_cluster}/groups/{g}",
                                  body={"partitions": len(diff[g]),
                                        "offsets": {str(tp): o for tp, o in sorted(diff[g].items())[:5]}},
                                  precondition=f"group {g} is {info[g].state} with no members on {plan.to_cluster}",
                                  expect=GroupOffsets.of(plan.to_cluster, {g: diff[g]}))
                         for g in sorted(diff)], concurrency=GROUP_WRITES_AT_ONCE)
        _mark(rb, "written_at")
        step.settle({"written_groups": sorted(diff)})
    return step.outcome


def verify_offsets(rb: Runbook, clients: Clients, move: Move, plan: PlannedOffsets) -> StepOutcome:
    """Read the committed offsets back from the new cluster: every planned offset must be there."""
    with rb.step(f"{move.direction}.verify", move.flow.name) as step:
        if rb.dry_run:
            step.note(reason="dry run: nothing was written, nothing to verify")
            return step.outcome
        # Looked up by (topic, partition), which finds a TP key (a TP is that tuple): no object made per row.
        committed = clients.admin(plan.to_cluster).committed_offsets(plan.groups)
        got = cast("dict[str, dict[tuple[str, int], int]]", committed)
        none: dict[tuple[str, int], int] = {}
        wrong = [f"{g} {t}-{p}: expected {o}, found {got.get(g, none).get((t, p), 'nothing')}"
                 for g, t, p, o in plan.rows if got.get(g, none).get((t, p)) != o]
        if wrong:
            raise VerifyFailed(f"Committed offsets on {plan.to_cluster} differ from the plan: " + "; ".join(wrong[:10])
                               + (f" (+{len(wrong) - 10} more)" if len(wrong) > 10 else ""))
        step.settle({"verified_partitions": len(plan.rows), "groups": len(plan.groups)})
    return step.outcome


GROUP_WRITERS_WAIT_S = 60.0
CONFIRM_STOPPED_S = 300.0


def stop_flow(rb: Runbook, clients: Clients, move: Move, flow: FlowSpec) -> list[StepOutcome]:
    """Stop the flow the groups left. The parts the cutover waits for — what could overwrite the groups' offsets on
    the target, and (planned) the source part, which replicates — are stopped first and awaited; the rest are asked
    to stop after them, and confirmed by `confirm_stopped`, off the RTO. (Unplanned, the source is gone, and parts
    reading it can take a minute to stop.) Connect's herder takes one request at a time, and a stop holds it until
    the part's tasks have stopped: asked side by side, the source's stop was answered after MM2's checkpoint task had
    stopped (2.6 s, a thousand groups' checkpoints on the scale stack); asked first, in 30 ms."""
    backend = backend_for(clients, flow)
    # Read before the stops are requested: Connect answers a connector's config after its herder has handled the
    # requests before it (asked right after three stops, it took 2.6 s of a thousand groups' cutover).
    writers = backend.group_writers()
    awaited = (["source"] if move.planned else []) + [w for w in writers if not (move.planned and w == "source")]
    out = backend.set_state(rb, "STOPPED", parts=awaited or "all", wait=False)
    with rb.step(f"{move.direction}.groups_protected", flow.name) as step:
        step.note(group_writers=writers, awaited=awaited,
                  reason="the parts that replicate (planned) or could overwrite group offsets on the target are "
                         "stopped first, and awaited; the others are asked to stop after them" if awaited else
                         "no part of the flow writes group offsets on the target: the stop requests suffice")
        for part in awaited if not rb.dry_run else []:
            step.settle(backend.wait_state("STOPPED", parts=part, timeout_s=GROUP_WRITERS_WAIT_S))
    protected = _now()
    if awaited:
        out += backend.set_state(rb, "STOPPED", parts=[p for p in backend.parts if p not in awaited], wait=False)
    # The flow counts as stopped (the RTO's end) when the groups were safe, once every stop is accepted: a stop
    # refused leaves no mark, and the run's report says what it changed so far.
    _mark(rb, FLOW_STOPPED_KEY, at=protected)
    return out


def confirm_stopped(rb: Runbook, clients: Clients, move: Move, flow: FlowSpec) -> StepOutcome:
    """Every part of the stopped flow shows STOPPED (bounded); a part still stopping is reported, not fatal:
    the stop was accepted by the backend and the groups are protected already."""
    with rb.step(f"{move.direction}.confirm_stopped", flow.name) as step:
        if rb.dry_run:
            step.note(reason="dry run: nothing was stopped")
            return step.outcome
        try:
            step.settle(backend_for(clients, flow).wait_state("STOPPED", timeout_s=CONFIRM_STOPPED_S))
        except MirrorbookError as exc:
            step.note(still_stopping=cut(str(exc), 2_000))
            rb.progress_set("still_stopping", cut(str(exc), 2_000))
    return step.outcome


def start_flow(rb: Runbook, clients: Clients, flow: FlowSpec) -> list[StepOutcome]:
    return backend_for(clients, flow).set_state(rb, "RUNNING")
