"""The approval of a runbook's plan: what a human is shown before the first mutation, and what they answered.

The plan is known by then (failover/failback: translated, gates passed; offsets: the change computed
against the replication's offsets as they are), so the request states exactly what will change — and the
calls it lists are the run's own next steps run as a dry run (`preview`), not a description of them, so
the approver sees what the real steps will do, summarised. The answer is recorded through the run's own
steps (`approval.request`, `approval.decision`, or `approval.skipped`), with the responder as the step's
user: the audit trail says who let the run change the clusters, or who stopped it. A rejection or an
unanswered request ends the run before anything was changed, and says how many mutating calls the run had
made (none, or the message says otherwise).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Callable, Iterable

from pydantic import BaseModel

from mirrorbook.audit import AuditEvent, AuditStore
from mirrorbook.bounds import cut
from mirrorbook.connect.models import ConnectorOffsets
from mirrorbook.errors import Refused
from mirrorbook.mm2.counts import Count
from mirrorbook.core.engine import PlannedCall, Runbook
from mirrorbook.runbooks.plan import TranslationPlan

APPROVE, REJECT = "Approve", "Reject"  # the standard provider's ApprovalOperator options
ROWS_SHOWN = 50  # the request shows the first rows; the totals count them all
PATHS_SHOWN = 3  # per kind of call, the first paths; the count says how many there are


class NotApproved(Refused):
    """The plan was rejected, or nobody answered in time: the run ends before its first mutation."""


class Request(BaseModel):
    """What the approver is shown: a one-line subject and a Markdown body; `facts` go to the audit."""

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


# -- the preview: the run's next steps as a dry run, recorded nowhere --------------------------------------

class PreviewAudit:
    """The audit store as a preview of the run's next steps sees it: it reads the run's real progress and
    snapshots, and writes nothing — the events a dry run would append are kept here, and progress it sets
    stays here. A dry run never snapshots or opens an intent; should it try, that is a bug, said loudly."""

    def __init__(self, audit: AuditStore) -> None:
        self._audit = audit
        self._progress: dict[str, Any] = {}
        self.kept: list[AuditEvent] = []

    def append(self, event: AuditEvent) -> None:
        self.kept.append(event)

    def append_all(self, events: Iterable[AuditEvent]) -> None:
        self.kept.extend(events)

    def progress_get(self, run_id: str, key: str, default: Any = None) -> Any:
        return self._progress[key] if key in self._progress else self._audit.progress_get(run_id, key, default)

    def progress_set(self, run_id: str, key: str, value: Any) -> None:
        self._progress[key] = value

    def snapshot(self, snapshot_id: str) -> Any:
        return self._audit.snapshot(snapshot_id)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"a preview reads progress and snapshots only; it has no {name}()")


def preview(rb: Runbook, steps: Iterable[Callable[[Runbook], Any]]) -> list[PlannedCall]:
    """The calls `steps` would make now: each runs as a dry run on a Runbook of this run and task whose
    audit records nothing (`PreviewAudit`). A step that would refuse (an active group on the target, a
    connector that must be STOPPED) refuses here, before anyone is asked to approve a plan that cannot run."""
    # PreviewAudit stands in for the AuditStore with what a dry run's steps use of it (and says so of the rest).
    dry = Runbook(rb.info, PreviewAudit(rb.audit), dry_run=True)  # type: ignore[arg-type]
    for step in steps:
        step(dry)
    return [p for o in dry.outcomes for p in o.planned]


def summarise(calls: list[PlannedCall]) -> list[str]:
    """One line per kind of call (action and method), in the order they first come: how many, the first
    paths, and the precondition of the first — a thousand groups' offsets read as one line."""
    kinds: dict[tuple[str, str], list[PlannedCall]] = {}
    for c in calls:
        kinds.setdefault((c.action, c.method), []).append(c)
    lines = []
    for (action, method), same in kinds.items():
        paths = ", ".join(cut(c.path, 160) for c in same[:PATHS_SHOWN])
        more = f" (+{len(same) - PATHS_SHOWN} more)" if len(same) > PATHS_SHOWN else ""
        lines.append(f"{len(same)}× {method} ({action}): {paths}{more} — because {cut(same[0].precondition, 300)}")
    return lines


# -- what the approver is shown ------------------------------------------------------------------------

def _table(rows: list[tuple[str, Any]]) -> str:
    return "\n".join(["| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)])


def _calls(lines: list[str]) -> str:
    return "**Calls it will make** (its next steps, run as a dry run just now)\n" + (
        "".join(f"\n{i}. {c}" for i, c in enumerate(lines, 1)) or "\nnone: everything is already as planned")


def _footer(timeout_s: int) -> str:
    return (f"\n\n**Approve** to go on. **Reject** — or no answer within {timeout_s} s — ends the run before "
            "anything is changed.")


def precheck_lag(rb: Runbook, direction: str) -> str:
    """Replication lag as the run's precheck measured it (the gate a planned move drained to)."""
    done = [e for e in rb.audit.events(run_id=rb.info.run_id, action=f"step.{direction}.precheck")
            if e.result != "refused" and isinstance(e.state_after, dict) and "lag_total" in e.state_after]
    if not done:
        return "not measured (the source cluster was not reachable)"
    after = done[-1].state_after
    return f"{after['lag_total']} record(s) over {after['lag_partitions']} partition(s), at the precheck"


def move_request(plan: TranslationPlan, *, lag: str, calls: list[PlannedCall], rpo: dict[str, Any] | None,
                 timeout_s: int) -> Request:
    """A failover's or failback's plan, as the approver sees it."""
    t = plan.totals()
    groups = sorted({r.group for r in plan.rows})
    names = ", ".join(cut(g, 80) for g in groups[:20]) + (f" (+{len(groups) - 20} more)" if len(groups) > 20 else "")
    skipped = Count.between(t["skipped"], t["skipped_max"])
    rows: list[tuple[str, Any]] = [
        ("groups", f"{t['groups']}: {names}"),
        ("partitions (offsets moved)", f"{t['partitions']} committed on {plan.to_cluster}"),
        ("records re-read", Count.between(t["re_read"], t["re_read_max"])),
        ("records skipped", skipped),
        ("replication lag", lag),
        ("translation", f"{plan.translation}; methods {t['methods']}"),
    ]
    if rpo is not None:
        rows.append(("RPO (unplanned)", f"at least {rpo.get('records')} record(s) never reached "
                                        f"{plan.to_cluster} (a lower bound, from a sample {rpo.get('sample_age_s')}s "
                                        f"old; unknown: {rpo.get('unknown')})"))
        if rpo.get("estimate"):
            rows.append(("RPO estimate (unplanned)", f"about {rpo['estimate']['records']} record(s) — "
                                                     f"{rpo['estimate']['note']}"))
    summary = summarise(calls)
    detail = [f"| {cut(r.group, 80)} | {cut(r.target_topic, 120)}-{r.partition} | {r.offset} | {r.re_read} | "
              f"{r.skip} | {r.method} |" for r in plan.rows[:ROWS_SHOWN]]
    more = f"\n\n(+{len(plan.rows) - ROWS_SHOWN} more row(s) in the plan)" if len(plan.rows) > ROWS_SHOWN else ""
    notes = "".join(f"\n- note: {cut(n)}" for n in plan.notes)
    body = (f"**{plan.direction} of {plan.flow}** ({plan.mode}): groups leave {plan.from_cluster} for "
            f"{plan.to_cluster}. Nothing has been changed yet.\n\n{_table(rows)}\n\n{_calls(summary)}{notes}"
            "\n\n| group | partition | offset | re-read | skip | method |\n|---|---|---|---|---|---|\n"
            + "\n".join(detail) + more + _footer(timeout_s))
    facts = {**t, "flow": plan.flow, "direction": plan.direction, "mode": plan.mode, "lag": lag, "calls": summary,
             "rpo_records": rpo.get("records") if rpo else None}
    return Request(subject=f"Approve the {plan.direction} of {plan.flow} ({plan.mode}): {t['groups']} group(s), "
                           f"{t['partitions']} partition(s), skipped {skipped}",
                   body=body, facts=facts)


def offset_changes(action: str, current: ConnectorOffsets, requested: ConnectorOffsets | None,
                   snapshot: ConnectorOffsets | None) -> list[tuple[str, Any, Any]]:
    """(partition, now, after) for every partition whose offset the change moves: an alter sets the ones it
    names, a reset clears all, a restore makes them the snapshot's exactly (the rest cleared)."""
    now = current.by_partition()
    if action == "reset":
        after: dict[str, Any] = {}
    elif action == "alter":
        after = {**now, **(requested.by_partition() if requested else {})}
    else:
        after = snapshot.by_partition() if snapshot else {}
    return [(k, now.get(k), after.get(k)) for k in sorted(set(now) | set(after)) if now.get(k) != after.get(k)]


def _partition(key: str) -> str:
    partition = json.loads(key)
    return ", ".join(f"{k}={partition[k]}" for k in sorted(partition))


def _offset(offset: Any) -> str:
    if offset is None:
        return "(none)"
    return str(offset.get("offset", offset)) if isinstance(offset, dict) else str(offset)


def offsets_request(*, flow: str, part: str, name: str, action: str, state: Any,
                    changes: list[tuple[str, Any, Any]], calls: list[PlannedCall], snapshot_id: str | None,
                    effect: str, timeout_s: int) -> Request:
    """An offsets change (alter, reset, restore) of one part of the flow's replication, as the approver sees it."""
    summary = summarise(calls)
    rows: list[tuple[str, Any]] = [("connector", f"{name} ({part}; {state})"), ("action", action),
                                   ("partitions changed", len(changes)), ("effect on replication", effect)]
    if snapshot_id:
        rows.append(("restores snapshot", cut(snapshot_id)))
    detail = [f"| {cut(_partition(k), 160)} | {_offset(a)} | {_offset(b)} |" for k, a, b in changes[:ROWS_SHOWN]]
    more = f"\n\n(+{len(changes) - ROWS_SHOWN} more partition(s))" if len(changes) > ROWS_SHOWN else ""
    body = (f"**{action} of the offsets of {name}** (flow {flow}). Nothing has been changed yet.\n\n"
            f"{_table(rows)}\n\n{_calls(summary)}"
            "\n\n| partition | now | after |\n|---|---|---|\n" + "\n".join(detail) + more + _footer(timeout_s))
    return Request(subject=f"Approve {action} of {name}'s offsets: {len(changes)} partition(s)",
                   body=body, facts={"flow": flow, "connector": name, "action": action,
                                     "partitions_changed": len(changes), "calls": summary})


# -- what the audit keeps ----------------------------------------------------------------------------

def record_request(rb: Runbook, flow: str, request: Request, policy: tuple[str, str], timeout_s: int) -> None:
    with rb.step(REQUEST, flow) as step:
        step.note(subject=request.subject, facts=request.facts, policy=policy[0], because=policy[1],
                  timeout_s=timeout_s)


def record_skipped(rb: Runbook, flow: str, policy: tuple[str, str]) -> None:
    with rb.step("approval.skipped", flow) as step:
        step.note(policy=policy[0], because=policy[1])


DECISION, REQUEST = "approval.decision", "approval.request"


def requested(rb: Runbook) -> bool:
    """Whether this run asked for approval already (an earlier try of its approval step)."""
    return bool(rb.audit.events(run_id=rb.info.run_id, action=f"step.{REQUEST}", limit=1))


def recorded_answer(rb: Runbook) -> Answer | None:
    """The answer this run already recorded (by any try of its approval step), if it has one."""
    found = rb.audit.events(run_id=rb.info.run_id, action=f"step.{DECISION}", limit=1, newest_first=True)
    if not found:
        return None
    d = found[0].details
    return Answer(chosen_options=d.get("answer") or [], responded_by_user=d.get("responded_by"),
                  responded_at=d.get("responded_at"), timedout=bool(d.get("timed_out")))


def record_answer(rb: Runbook, flow: str, answer: Answer) -> None:
    """The answer, recorded as the responder's step; a rejection or a timeout ends the run (NotApproved)."""
    who = answer.responder
    responder = Runbook(rb.info.model_copy(update={"user": who or rb.info.user}), rb.audit, dry_run=rb.dry_run)
    with responder.step(DECISION, flow) as step:
        step.note(answer=answer.chosen_options, responded_by=answer.responded_by_user,
                  responded_at=answer.responded_at.isoformat() if answer.responded_at else None,
                  timed_out=answer.timedout, triggered_by=rb.info.user)
        stands(rb, answer)


def stands(rb: Runbook, answer: Answer) -> None:
    """An approval lets the run go on; a rejection or a timeout ends it (NotApproved), saying what it changed."""
    if answer.approved:
        return
    changed = rb.audit.count_mutating(rb.info.run_id)
    outcome = ("nothing was changed" if changed == 0 else
               f"{changed} mutating call(s) of this run had been made before it (see its audit trail)")
    if answer.timedout:
        raise NotApproved(f"Nobody answered the approval request in time: the run ends here; {outcome}.",
                          "trigger the runbook again when someone can approve it, or set approval=skip")
    raise NotApproved(f"The plan was rejected by {cut(answer.responder or 'an unknown user')}: the run ends here; "
                      f"{outcome}.", "change what the plan showed was wrong and trigger the runbook again")
