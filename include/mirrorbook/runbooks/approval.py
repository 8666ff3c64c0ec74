"""The approval of a runbook's plan: what a human is shown before the first mutation, and what they answered.

The plan is known by then (failover/failback: translated, gates passed; offsets: the change computed
against the connector's offsets as they are), so the request states exactly what will change. The answer
is recorded through the run's own steps (`approval.request`, `approval.decision`, or `approval.skipped`),
with the responder as the step's user: the audit trail says who let the run change the clusters, or who
stopped it. A rejection or an unanswered request ends the run before anything was changed, and says how
many mutating calls the run had made (none, or the message says otherwise).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel

from mirrorbook.bounds import cut
from mirrorbook.connect.models import ConnectorOffsets
from mirrorbook.errors import Refused
from mirrorbook.mm2.counts import Count
from mirrorbook.runbooks.engine import Runbook
from mirrorbook.runbooks.offsets import RESET, load_snapshot_offsets, plan_change
from mirrorbook.runbooks.plan import TranslationPlan

APPROVE, REJECT = "Approve", "Reject"  # the standard provider's ApprovalOperator options
ROWS_SHOWN = 50  # the request shows the first rows; the totals count them all


class NotApproved(Refused):
    """The plan was rejected, or nobody answered in time: the run ends before its first mutation."""


class Request(BaseModel):
    """What the approver is shown: a one-line subject and a Markdown body."""

    subject: str
    body: str
    facts: dict[str, Any]


class Answer(BaseModel):
    """The response as Airflow resumes the task with it (HITLDetail.as_resume_event_payload)."""

    chosen_options: list[str] = []
    responded_by_user: dict[str, Any] | None = None
    responded_at: datetime | None = None
    timedout: bool = False

    @property
    def approved(self) -> bool:
        return self.chosen_options == [APPROVE] and not self.timedout

    @property
    def responder(self) -> str | None:
        user = self.responded_by_user or {}
        return str(user.get("name") or user.get("id") or "") or None


def _table(rows: list[tuple[str, Any]]) -> str:
    return "\n".join(["| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)])


def _footer(timeout_s: int) -> str:
    return (f"\n\n**Approve** to go on. **Reject** — or no answer within {timeout_s} s — ends the run before "
            "anything is changed.")


def _lag(rb: Runbook, direction: str) -> str:
    """Replication lag as the run's precheck measured it (the gate a planned move drained to)."""
    done = [e for e in rb.audit.events(run_id=rb.info.run_id, action=f"step.{direction}.precheck")
            if e.result != "refused" and isinstance(e.state_after, dict) and "lag_total" in e.state_after]
    if not done:
        return "not measured (the source cluster was not reachable)"
    after = done[-1].state_after
    return f"{after['lag_total']} record(s) over {after['lag_partitions']} partition(s), at the precheck"


def move_request(rb: Runbook, plan: TranslationPlan, *, via: str, other_flow: str | None,
                 rpo: dict[str, Any] | None, timeout_s: int) -> Request:
    """A failover's or failback's plan, as the approver sees it."""
    t = plan.totals()
    groups = sorted({r.group for r in plan.rows})
    names = ", ".join(cut(g, 80) for g in groups[:20]) + (f" (+{len(groups) - 20} more)" if len(groups) > 20 else "")
    rows: list[tuple[str, Any]] = [
        ("groups", f"{t['groups']}: {names}"),
        ("partitions (offsets moved)", f"{t['partitions']} committed on {plan.to_cluster}"),
        ("records re-read", Count.between(t["re_read"], t["re_read_max"])),
        ("records skipped", Count.between(t["skipped"], t["skipped_max"])),
        ("replication lag", _lag(rb, plan.direction)),
        ("translation", f"{plan.translation}; methods {t['methods']}"),
    ]
    if rpo is not None:
        rows.append(("RPO estimate (unplanned)", f"at least {rpo.get('records')} record(s) never reached "
                                                 f"{plan.to_cluster} (a lower bound; unknown: {rpo.get('unknown')})"))
    calls = [f"commit the offsets of {t['groups']} group(s) on {plan.to_cluster} ({t['partitions']} partition(s); "
             "only groups EMPTY or absent there, snapshot first), then read them back",
             f"stop the connectors of {via} (source, checkpoint, heartbeat)"]
    if other_flow:
        calls.append(f"start {other_flow}")
    detail = [f"| {cut(r.group, 80)} | {cut(r.target_topic, 120)}-{r.partition} | {r.offset} | {r.re_read} | "
              f"{r.skip} | {r.method} |" for r in plan.rows[:ROWS_SHOWN]]
    more = f"\n\n(+{len(plan.rows) - ROWS_SHOWN} more row(s) in the plan)" if len(plan.rows) > ROWS_SHOWN else ""
    notes = "".join(f"\n- note: {cut(n)}" for n in plan.notes)
    body = (f"**{plan.direction} of {plan.flow}** ({plan.mode}): groups leave {plan.from_cluster} for "
            f"{plan.to_cluster}. Nothing has been changed yet.\n\n{_table(rows)}\n\n**Calls it will make**\n"
            + "".join(f"\n{i}. {c}" for i, c in enumerate(calls, 1)) + notes
            + "\n\n| group | partition | offset | re-read | skip | method |\n|---|---|---|---|---|---|\n"
            + "\n".join(detail) + more + _footer(timeout_s))
    facts = {**t, "flow": plan.flow, "direction": plan.direction, "mode": plan.mode, "calls": calls,
             "rpo_records": rpo.get("records") if rpo else None}
    return Request(subject=f"Approve the {plan.direction} of {plan.flow} ({plan.mode}): {t['groups']} group(s), "
                           f"{t['partitions']} partition(s), skipped {Count.between(t['skipped'], t['skipped_max'])}",
                   body=body, facts=facts)


def offsets_request(rb: Runbook, *, flow: str, connector: str, action: str, state: str, current: ConnectorOffsets,
                    requested: ConnectorOffsets | None, snapshot_id: str | None, stop_first: bool, effect: str,
                    timeout_s: int) -> Request:
    """An offsets change (alter, reset, restore), computed as the apply step computes it: the same
    `plan_change` on the connector's offsets as they are now."""
    snapshot = load_snapshot_offsets(rb, snapshot_id, connector) if action == "restore" and snapshot_id else None
    change = plan_change(action, current, requested, snapshot)
    before = {_key(e.partition): e.offset for e in current.offsets}
    if change is None:
        moved: list[tuple[str, Any, Any]] = []
    elif change == RESET:
        moved = [(k, v, None) for k, v in before.items()]
    else:
        assert isinstance(change, ConnectorOffsets)
        moved = [(k, before.get(k), e.offset) for e in change.offsets for k in [_key(e.partition)]]
    calls: list[str] = []
    if change is not None and state != "STOPPED":
        calls.append(f"stop {connector} (it is {state}; stop_first)" if stop_first else
                     f"none: {connector} is {state} and must be STOPPED (the apply step will refuse)")
    if change is not None and (state == "STOPPED" or stop_first):
        calls.append(f"{'DELETE' if change == RESET else 'PATCH'} the offsets of {connector} "
                     f"({len(moved)} partition(s)), then read them back")
        if state != "STOPPED":
            calls.append(f"put {connector} back to {state}")
    rows = [("connector", f"{connector} ({state})"), ("action", action),
            ("partitions changed", len(moved)), ("effect on replication", effect)]
    if snapshot_id:
        rows.append(("restores snapshot", cut(snapshot_id)))
    detail = [f"| {cut(k, 160)} | {_offset(a)} | {_offset(b)} |" for k, a, b in moved[:ROWS_SHOWN]]
    more = f"\n\n(+{len(moved) - ROWS_SHOWN} more partition(s))" if len(moved) > ROWS_SHOWN else ""
    body = (f"**{action} of the offsets of {connector}** (flow {flow}). Nothing has been changed yet.\n\n"
            f"{_table(rows)}\n\n**Calls it will make**\n"
            + ("".join(f"\n{i}. {c}" for i, c in enumerate(calls, 1)) or "\nnone: the offsets are already as requested")
            + "\n\n| partition | now | after |\n|---|---|---|\n" + "\n".join(detail) + more + _footer(timeout_s))
    return Request(subject=f"Approve {action} of {connector}'s offsets: {len(moved)} partition(s)",
                   body=body, facts={"flow": flow, "connector": connector, "action": action,
                                     "partitions_changed": len(moved), "calls": calls})


def _key(partition: dict[str, Any]) -> str:
    return ", ".join(f"{k}={partition[k]}" for k in sorted(partition))


def _offset(offset: dict[str, Any] | None) -> str:
    if offset is None:
        return "(none)"
    return str(offset.get("offset", offset))


def record_request(rb: Runbook, flow: str, request: Request, policy: tuple[str, str], timeout_s: int) -> None:
    with rb.step("approval.request", flow) as step:
        step.note(subject=request.subject, facts=request.facts, policy=policy[0], because=policy[1],
                  timeout_s=timeout_s)


def record_skipped(rb: Runbook, flow: str, policy: tuple[str, str]) -> None:
    with rb.step("approval.skipped", flow) as step:
        step.note(policy=policy[0], because=policy[1])


def record_answer(rb: Runbook, flow: str, answer: Answer) -> None:
    """The answer, recorded as the responder's step; a rejection or a timeout ends the run (NotApproved)."""
    who = answer.responder
    responder = Runbook(rb.info.model_copy(update={"user": who or rb.info.user}), rb.audit, dry_run=rb.dry_run)
    with responder.step("approval.decision", flow) as step:
        step.note(answer=answer.chosen_options, responded_by=answer.responded_by_user,
                  responded_at=answer.responded_at.isoformat() if answer.responded_at else None,
                  timed_out=answer.timedout, triggered_by=rb.info.user)
        if answer.approved:
            return
        changed = rb.audit.count_mutating(rb.info.run_id)
        outcome = ("nothing was changed" if changed == 0 else
                   f"{changed} mutating call(s) of this run had been made before it (see its audit trail)")
        if answer.timedout:
            raise NotApproved(f"Nobody answered the approval request in time: the run ends here; {outcome}.",
                              "trigger the runbook again when someone can approve it, or set approval=skip")
        raise NotApproved(f"The plan was rejected by {cut(who or 'an unknown user')}: the run ends here; {outcome}.",
                          "change what the plan showed was wrong and trigger the runbook again")
