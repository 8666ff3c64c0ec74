"""mm2_failover_on_alert: from a flow's state change to a proposed unplanned failover, never flapping.

1. **which flows** — those whose change (the health check's Asset events, runbooks/health/events.py) was to
   NOT_REPLICATING, among the flows the topology's `failover_on_alert.flows` watches; or the one flow a
   manual run names;
2. **down long enough** — each such flow's episode (the check run that found it NOT_REPLICATING first) must
   last `consecutive_checks` checks; a flow that changes again meanwhile (recovered, or another episode)
   is left alone;
3. **not too soon** — no proposal within `cooldown_s` of a failover or failback of the flow, a rejected
   failover of it, or an earlier proposal; none while a runbook holds the flow. All of that is read from the
   audit store, so it survives restarts and holds across runs of this DAG;
4. **propose** — an mm2_failover run of the flow, mode unplanned, `approval=required` whatever the topology
   says: a human decides. Its run id is derived from the episode, so one episode proposes one failover.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Literal

from pydantic import BaseModel, Field

from mirrorbook.audit import AuditStore
from mirrorbook.core.engine import Runbook
from mirrorbook.runbooks.health.events import FlowMemory, memory
from mirrorbook.runbooks.params import FormParams
from mirrorbook.topology import Topology

DOWN = "NOT_REPLICATING"
PROPOSAL = "alert.proposal"
PROPOSED_DAG = "mm2_failover"
MOVES = ("mm2_failover", "mm2_failback")


class OnAlertParams(FormParams):
    """mm2_failover_on_alert's form: a scheduled run takes its flows from the Asset events that triggered it."""

    flow: str | None = Field(None, title="Flow",
                             description="blank: the flows whose change to NOT_REPLICATING triggered this run; a "
                                         "flow name: watch that flow's current episode (a manual run)")

    def check(self, topology: Topology) -> None:
        if self.flow:
            topology.flow(self.flow)


class Episode(BaseModel):
    """A flow found NOT_REPLICATING since the check run `since_run_id`."""

    flow: str
    since_run_id: str


def episodes(topology: Topology, changes: Iterable[dict[str, Any]], flow: str | None = None,
             audit: AuditStore | None = None) -> list[Episode]:
    """The episodes to watch: from the changes (Asset events' extra) to NOT_REPLICATING of watched flows, or
    the named flow's current one (from the health check's memory) when it is NOT_REPLICATING."""
    watched = {f.name for f in topology.failover_on_alert.watched(topology)}
    if flow is not None:
        now = memory(audit, flow) if audit is not None else None
        return [Episode(flow=flow, since_run_id=now.since_run_id)] if now and now.state == DOWN else []
    found: dict[str, Episode] = {}
    for c in changes:
        if c.get("new_state") == DOWN and c.get("flow") in watched:
            found[str(c["flow"])] = Episode(flow=str(c["flow"]), since_run_id=str(c["check_run_id"]))
    return sorted(found.values(), key=lambda e: e.flow)


Standing = Literal["down", "over", "waiting"]


def standing(now: FlowMemory | None, episode: Episode, checks: int) -> Standing:
    """Whether the episode lasted `checks` checks (down), ended (over: another state or a later episode), or
    has not been checked often enough yet (waiting)."""
    if now is None or now.since_run_id != episode.since_run_id or now.state != DOWN:
        return "over"
    return "down" if now.checks >= checks else "waiting"


def sort_out(audit: AuditStore, watching: list[Episode], checks: int) -> dict[Standing, list[Episode]]:
    out: dict[Standing, list[Episode]] = {"down": [], "over": [], "waiting": []}
    for e in watching:
        out[standing(memory(audit, e.flow), e, checks)].append(e)
    return out


def proposal_run_id(episode: Episode) -> str:
    """One proposal per episode: the run id is the flow's (made safe for Airflow) and the episode's digest."""
    digest = hashlib.sha256(f"{episode.flow}\0{episode.since_run_id}".encode()).hexdigest()[:12]
    return f"failover_on_alert__{re.sub(r'[^A-Za-z0-9_.-]', '_', episode.flow)[:100]}__{digest}"


def cooling(audit: AuditStore, episode: Episode, cooldown_s: int, now: datetime | None = None) -> str | None:
    """Why the flow gets no proposal now, if it gets none: a runbook holds it, or a failover, failback,
    rejection or proposal of it within the cooldown. This episode's own proposal (a retry) does not count."""
    holder = audit.lock_holder(episode.flow)
    if holder is not None:
        return f"{holder.dag_id} run {holder.run_id} holds {episode.flow}"
    now = now or datetime.now(timezone.utc)
    since = now - timedelta(seconds=cooldown_s)
    mine = proposal_run_id(episode)
    for e in audit.iter_events(flow=episode.flow, since=since, newest_first=True):
        when = f"at {e.started_at.isoformat()}, within the cooldown of {cooldown_s} s"
        if e.dag_id in MOVES and e.kind == "call" and e.mutating and e.result in ("ok", "error"):
            return f"{e.dag_id} run {e.run_id} changed {episode.flow} {when}"
        if e.action == "step.approval.decision" and e.result == "refused" and e.dag_id in MOVES:
            return f"{e.dag_id} run {e.run_id} of {episode.flow} was not approved {when}"
        if e.action == f"step.{PROPOSAL}" and e.details.get("proposed_run_id") != mine:
            return f"a failover of {episode.flow} was proposed (run {e.details.get('proposed_run_id')}) {when}"
    return None


def proposal_conf(flow: str) -> dict[str, Any]:
    """What the proposed failover runs with: unplanned (the flow is down), and a human approves it, always."""
    return {"flow": flow, "mode": "unplanned", "approval": "required"}


def proposed(audit: AuditStore, episode: Episode) -> bool:
    """Whether this episode's proposal is recorded already (a retry, or a second run on the same episode)."""
    mine = proposal_run_id(episode)
    return any(e.details.get("proposed_run_id") == mine
               for e in audit.iter_events(flow=episode.flow, action=f"step.{PROPOSAL}", newest_first=True))


def record_proposal(rb: Runbook, episode: Episode, checks: int, run_id: str) -> None:
    with rb.step(PROPOSAL, episode.flow) as step:
        step.note(proposed_dag=PROPOSED_DAG, proposed_run_id=run_id, conf=proposal_conf(episode.flow),
                  since_run_id=episode.since_run_id, consecutive_checks=checks)


def record_cooldown(rb: Runbook, episode: Episode, why: str) -> None:
    with rb.step("alert.cooldown", episode.flow) as step:
        step.note(since_run_id=episode.since_run_id, reason=why)
