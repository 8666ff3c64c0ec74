"""Where a run stands when it stops short of its end.

What the run completed and what it changed (its audit trail), each connector of the flows it drives as it
stands now — read from Connect within a short deadline, or else the last state the audit trail knows, with
where that came from and when — and what a re-run will do, from the same decisions the runbook makes.

One piece serves every runbook task's failure (the operators' failure path appends `at_failure`'s lines to
the task's error) and the report of an incomplete failover or failback (`so_far`). Nothing here raises: the
explanation of a failure must never replace the failure.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Sequence

from pydantic import BaseModel, Field

from mirrorbook.audit import AuditStore
from mirrorbook.bounds import cut, listed
from mirrorbook.clients import Clients
from mirrorbook.connect.errors import ConnectDeadlineExceeded, ConnectError, ConnectRefusal
from mirrorbook.connect.models import ConnectorStatus, TaskState, WorkerState
from mirrorbook.redaction import get_logger
from mirrorbook.replication import backend_for
from mirrorbook.replication.mm2_connect_offsets import state_before_stop_key
from mirrorbook.core.changes import Changes, RoleOf, change, connector_of
from mirrorbook.runbooks.connectors import ACTION_TARGET, FlowTarget, rerun_sentence
from mirrorbook.core.engine import Runbook
from mirrorbook.runbooks.move import PLAN_KEY
from mirrorbook.topology import FlowSpec

log = get_logger(__name__)

READ_DEADLINE_S = 5.0  # the task has failed already: a dead worker must not hold its failure for long
EVENTS_SEARCHED = 500  # a flow's newest audit events searched for the last state it was seen in


def _clock(at: datetime) -> str:
    return at.astimezone(timezone.utc).strftime("%H:%M:%SZ")


def _when(at: datetime) -> str:
    return at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- what the run did ---------------------------------------------------------------------------------
class SoFar(BaseModel):
    """A run's progress read back from its audit trail."""

    completed: list[str] = Field(default_factory=list)  # steps that ended ok or with nothing to do
    changed: list[str] = Field(default_factory=list)  # what its accepted mutations changed
    maybe_changed: list[str] = Field(default_factory=list)  # calls that failed where Connect may have acted
    written: dict[str, int] = Field(default_factory=dict)  # groups whose offsets were written, per cluster

    def lines(self) -> list[str]:
        return ([f"steps completed: {listed(self.completed) or 'none'}",
                 f"already changed: {listed(self.changed) or 'nothing'}"]
                + ([f"may have changed (the call failed after it was sent): {listed(self.maybe_changed)}"]
                   if self.maybe_changed else []))


def _role_in(flows: Iterable[FlowSpec]) -> RoleOf:
    """`A->B source` for a flow's connector, None for a connector of no flow."""
    roles = {connector: f"{flow.name} {role}" for flow in flows for role, connector in flow.connector_names.items()}
    return roles.get


def so_far(audit: AuditStore, run_id: str, flows: Sequence[FlowSpec] = ()) -> SoFar:
    """Steps completed and what changed, from the run's audit events (groups written counted per cluster)."""
    out = SoFar()
    role_of = _role_in(flows)
    changes = Changes()
    for e in audit.iter_events(run_id=run_id):  # streamed: a run may write thousands of groups
        method, path = (e.request.method, e.request.path) if e.request else (None, "")
        if e.kind == "step" and e.result in ("ok", "noop"):
            role = e.details.get("role")
            step = e.action.removeprefix("step.") + (f" ({role})" if isinstance(role, str) else "")
            if step not in out.completed:
                out.completed.append(step)
        elif e.kind == "call" and e.mutating and e.result == "ok":
            changes.add(e.action, method, path, role_of)
        elif e.kind == "call" and e.mutating and e.result == "error":
            status = e.request.status if e.request else None
            asked = change(e.action, method, path, role_of).replace(" accepted by Connect", " asked")
            # A 4xx was refused; no answer, or a 5xx, may hide a call Connect applied.
            if (status is None or status >= 500) and asked not in out.maybe_changed:
                out.maybe_changed.append(asked)
    out.written, out.changed = changes.written(), changes.lines()
    return out


# -- how the flow stands ----------------------------------------------------------------------------------
class PartNow(BaseModel):
    """One connector of a flow as it stands: read from Connect now, or last known (and from where)."""

    role: str
    status: ConnectorStatus | None = None  # None: Connect has no such connector, or nothing is known
    known: bool = True  # False: not read, and nothing in the audit trail either
    source: str = "read"  # "read", or where the last known state comes from
    at: datetime | None = None

    def words(self) -> str:
        if not self.known:
            return f"{self.role} unknown"
        if self.status is None:
            return f"{self.role} absent"
        st = self.status
        odd = [f"{t.id}:{t.state}" for t in st.tasks if t.state != st.connector.state]
        text = f"{self.role} {st.connector.state}" + (f" (tasks {', '.join(odd)})" if odd else "")
        if self.source != "read" and self.at is not None:
            text += f" ({self.source}, {_when(self.at)})"
        return text


class FlowNow(BaseModel):
    flow: str
    place: str  # the Connect cluster, by alias and URL (never its credentials)
    read_at: datetime | None = None  # set when every part was read from Connect now
    unreadable: str | None = None  # why Connect could not be read now: a refusal, said first
    parts: list[PartNow] = Field(default_factory=list)

    def statuses(self) -> dict[str, ConnectorStatus | None]:
        """What a re-run would find, as far as is known (unknown parts are left out)."""
        return {p.role: p.status for p in self.parts if p.known}

    def render(self) -> str:
        states = ", ".join(p.words() for p in self.parts)
        if self.read_at is not None:
            return f"flow {cut(self.flow)} now: {states} (read at {_clock(self.read_at)} from {self.place})"
        return f"flow {cut(self.flow)}: {self.unreadable}; last known: {states}"


def _recorded(name: str, state: Any) -> ConnectorStatus | None:
    """A status from what a step recorded (`replication.mm2_connect_states.connector_state`)."""
    if not isinstance(state, dict) or not isinstance(state.get("connector"), str):
        return None
    tasks = [TaskState(id=i, state=str(s)) for i, s in enumerate(state.get("tasks") or []) if isinstance(s, str)]
    return ConnectorStatus(name=name, connector=WorkerState(state=state["connector"]), tasks=tasks)


# The state a connector call Connect accepted leaves a connector in (a restart: running again).
_VERB_TARGET: dict[str, FlowTarget] = {"restart": "RUNNING", **{verb: t for verb, t in ACTION_TARGET.items()}}


def last_known(audit: AuditStore, flow: FlowSpec) -> dict[str, PartNow]:
    """Per part, the newest of: a connector step's recorded state (any run), a state change Connect accepted,
    the health check's latest sample."""
    names = {name: role for role, name in flow.connector_names.items()}
    found: dict[str, PartNow] = {}

    def keep(part: PartNow) -> None:
        had = found.get(part.role)
        if had is None or (part.at and had.at and part.at > had.at):
            found[part.role] = part

    for e in audit.iter_events(flow=flow.name, limit=EVENTS_SEARCHED, newest_first=True):
        if e.kind == "step" and e.action.startswith("step.connector.") and e.details.get("connector") in names:
            name = e.details["connector"]
            status = _recorded(name, e.state_after) or _recorded(name, e.state_before)
            if status is not None:
                keep(PartNow(role=names[name], status=status, source=f"seen by run {cut(e.run_id or '?', 80)}",
                             at=e.ended_at))
        elif e.kind == "call" and e.mutating and e.result == "ok" and e.action.startswith("connector."):
            name, verb = connector_of(e.request.path if e.request else "")
            target = _VERB_TARGET.get(verb)
            if name in names and target:
                keep(PartNow(role=names[name], at=e.ended_at, source=f"{verb} accepted, run {cut(e.run_id or '?', 80)}",
                             status=ConnectorStatus(name=name, connector=WorkerState(state=target))))
    sample = audit.latest_metrics(flow.name)
    if sample is not None:
        for role, c in (sample.metrics.get("connectors") or {}).items():
            if role in dict(flow.connector_names.items()) and isinstance(c, dict) and isinstance(c.get("state"), str):
                keep(PartNow(role=role, at=sample.observed_at, source="health check",
                             status=ConnectorStatus(name=flow.connector(role),
                                                    connector=WorkerState(state=c["state"]))))
    return found


def flow_now(clients: Clients, audit: AuditStore, flow: FlowSpec, deadline_s: float = READ_DEADLINE_S) -> FlowNow:
    """The flow's parts read from its replication backend within `deadline_s`; if it cannot be read, the
    last known."""
    place = f"Connect cluster {cut(flow.connect_cluster)}"
    try:
        backend = backend_for(clients, flow)
        place = backend.place
        statuses = backend.part_states(deadline_s=deadline_s)
        return FlowNow(flow=flow.name, place=place, read_at=datetime.now(timezone.utc),
                       parts=[PartNow(role=r, status=statuses[r]) for r, _ in flow.connector_names.items()])
    except Exception as exc:  # noqa: BLE001 — anything Connect (or resolving it) did: fall back, never raise
        if isinstance(exc, ConnectRefusal):  # who refused what leads (it names the place)
            unreadable = exc.headline()
        else:
            reason = (exc.message if isinstance(exc, ConnectDeadlineExceeded) else
                      exc.reason() if isinstance(exc, ConnectError) else f"{type(exc).__name__}: {exc}")
            unreadable = f"{place} could not be read now ({cut(reason)})"
    known = last_known(audit, flow)
    return FlowNow(flow=flow.name, place=place, unreadable=cut(unreadable, 400), parts=[
        known.get(r, PartNow(role=r, known=False)) for r, _ in flow.connector_names.items()])


# -- what a re-run will do --------------------------------------------------------------------------------
Rerun = Callable[[list[FlowNow]], str]


def set_state_rerun(target: FlowTarget, selection: str = "all") -> Rerun:
    """A re-run of a pause/resume/stop of the first flow: the calls the runbook would make from its state."""
    def say(nows: list[FlowNow]) -> str:
        now = nows[0]
        basis = "" if now.read_at is not None else " (said from the last known state: it reads each part first)"
        return f"on {cut(now.flow)}, {rerun_sentence(now.statuses(), selection, target)}{basis}"
    return say


def at_failure(rb: Runbook, clients: Clients, flows: list[FlowSpec], rerun: Rerun | None = None, *,
               deadline_s: float = READ_DEADLINE_S) -> str:
    """The lines a failed runbook task ends its error with: the run so far, each flow now, what a re-run
    (clearing the failed task) will do. Never raises."""
    lines = [f"where run {cut(rb.info.run_id, 80)} stands:"]
    try:
        lines += [f"  {line}" for line in so_far(rb.audit, rb.info.run_id, flows).lines()]
    except Exception as exc:  # noqa: BLE001 — the audit store may be what failed
        lines.append(f"  its audit trail could not be read: {type(exc).__name__}: {cut(str(exc))}")
    nows: list[FlowNow] = []
    for flow in flows:
        try:
            nows.append(flow_now(clients, rb.audit, flow, deadline_s))
            lines.append(f"  {nows[-1].render()}")
        except Exception as exc:  # noqa: BLE001
            lines.append(f"  flow {cut(flow.name)}: its state is unknown ({type(exc).__name__}: {cut(str(exc))})")
    if rerun is not None and len(nows) == len(flows):
        try:
            lines.append(f"  a re-run of this task (clear it) will: {rerun(nows)}")
        except Exception as exc:  # noqa: BLE001
            log.warning("what a re-run will do could not be said: %s", exc)
    return "\n".join(lines)


MOVE_CHECKS = {
    "precheck": "check both clusters, the flow and the groups again; it changes nothing",
    "verify": "read the committed offsets back from {to} again; it changes nothing",
    "confirm_stopped": "wait again for every part of {via} to show STOPPED; it changes nothing",
    "report": "build the report again from the audit trail; it changes nothing",
}


def move_rerun(rb: Runbook, step: str, to_cluster: str) -> Rerun:
    """A re-run of one failover/failback step, from the run's own progress: the plan it keeps, the offsets it
    wrote. `nows[0]` is the flow the step drives (the other direction's, for `start_other_flow`)."""
    def say(nows: list[FlowNow]) -> str:
        plan = rb.progress_get(PLAN_KEY)
        if step == "translate":
            return (f"reuse this run's plan, computed at {cut(str(plan.get('computed_at')), 40)} (no new translation)"
                    if plan else "translate the groups' offsets (nothing has been written by this run)")
        if step == "write_offsets":
            done = so_far(rb.audit, rb.info.run_id).written.get(to_cluster, 0)
            return (f"compare the planned offsets with those committed on {cut(to_cluster)} and write only what "
                    f"differs ({done} group(s) already written by this run are not written again)")
        if step == "stop_flow":
            return set_state_rerun("STOPPED")(nows)
        if step == "start_other_flow":
            return set_state_rerun("RUNNING")(nows)
        return MOVE_CHECKS.get(step, "run the step again").format(to=cut(to_cluster), via=cut(nows[0].flow))
    return say


def offsets_rerun(rb: Runbook, flow: FlowSpec, role: str, action: str) -> Rerun:
    """A re-run of an offsets change: it reads the connector's offsets again, changes only what still differs,
    and brings back the state a stop of this run's found it in (kept in the run's progress)."""
    def say(nows: list[FlowNow]) -> str:
        if action == "list":
            return f"list the offsets of {cut(flow.name)} {role} again; it changes nothing"
        previous = rb.progress_get(state_before_stop_key(flow.connector(role)))
        text = (f"read the offsets of {cut(flow.name)} {role} again and {action} them only where they still differ "
                f"from the request")
        return text + (f"; then bring {role} back to {cut(str(previous), 40)}, the state this run stopped it from"
                       if previous else "")
    return say
