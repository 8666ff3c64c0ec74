"""RTO deadlines: a failover or failback that runs past its flow's `rto_slo_s` (from the moment the run was
queued) is audited as `deadline.missed`, naming the step the run is in, and alerted (webhook when configured).

Airflow's DAG-run deadlines are evaluated by the scheduler (never by dag.test()) and their interval is fixed
when the DAG is parsed, while a run picks its flow when it is triggered. So a runbook DAG carries one
`DeadlineAlert` per distinct `rto_slo_s` of the topology's flows (as the DAG processor read it); when one
fires, its callback acts only if the run's flow has that SLO — the others are some other flow's.

The callback runs in the triggerer (an AsyncCallback). Where the run is comes from Airflow itself — the
states of its tasks, asked through the triggerer's own channel to the API server, so a run waiting at a
gate (a deferred sensor that records nothing until it is done) or for approval is named as such — and
from the run's audit trail (its last recorded step). It reads the topology and the audit store like the
runbooks do, never Airflow's database.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

# airflow/sdk/__init__.pyi (task-sdk 1.3.2) leaves out these three, which its __init__.py exports.
from airflow.sdk import AsyncCallback, DeadlineAlert, DeadlineReference  # type: ignore[attr-defined]

from mirrorbook.airflow.notifiers import Alert, post_alert
from mirrorbook.audit import AuditStore
from mirrorbook.bounds import cut
from mirrorbook.errors import Refused
from mirrorbook.redaction import get_logger
from mirrorbook.core.engine import RunInfo, Runbook
from mirrorbook.topology import DEFAULT_RTO_SLO_S, Topology, load_topology

log = get_logger(__name__)

# Task states of a run that is still at work, how a miss names each, most telling first (a gate waiting
# tells more than the proof warming up beside it).
IN_PROGRESS = {"awaiting_input": "waiting for approval (Required Actions)",
               "deferred": "waiting (deferred to the triggerer)", "up_for_reschedule": "waiting to poke again",
               "running": "running", "up_for_retry": "waiting to retry", "queued": "queued", "scheduled": "scheduled"}


def rto_deadlines(topology: Topology | None) -> list[DeadlineAlert]:
    """One alert per distinct SLO of the topology's flows (the default one without a topology)."""
    slos = sorted({f.rto_slo_s for f in topology.flows} if topology else set()) or [DEFAULT_RTO_SLO_S]
    return [DeadlineAlert(reference=DeadlineReference.DAGRUN_QUEUED_AT, interval=timedelta(seconds=s),
                          callback=AsyncCallback(rto_missed, kwargs={"rto_slo_s": s}), name=f"rto-{s}s")
            for s in slos]


async def rto_missed(rto_slo_s: int, context: dict[str, Any], **_: Any) -> None:
    """The deadline callback. Airflow passes `context`: the run as the REST API showed it when the scheduler found
    the deadline passed, and the deadline itself."""
    run, deadline = context.get("dag_run") or {}, context.get("deadline") or {}
    if ended_in_time(run, deadline):
        log.info("%s/%s ended (%s) before its %s s RTO deadline: nothing missed", run.get("dag_id"),
                 run.get("dag_run_id"), run.get("state"), rto_slo_s)
        return
    states = await asyncio.to_thread(task_states, run)
    await asyncio.to_thread(record_miss, rto_slo_s, run, states)


def ended_in_time(run: dict[str, Any], deadline: dict[str, Any]) -> bool:
    """Whether the run had ended by the time its deadline passed. Airflow prunes a run's deadlines only when it
    succeeds, so those of a failed run — a rejected failover among them — still fire, later: such a run missed
    nothing. A run that ended after the deadline passed (before the scheduler noticed) did miss it."""
    if run.get("state") not in ("success", "failed"):
        return False
    end, due = _instant(run.get("end_date")), _instant(deadline.get("deadline_time"))
    return end is None or due is None or end <= due


def _instant(value: Any) -> datetime | None:
    if isinstance(value, datetime) or value is None:
        return value
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def task_states(run: dict[str, Any]) -> dict[str, str] | None:
    """The run's task states as Airflow has them now; None where there is no channel to ask (not in the
    triggerer) or it did not answer — the miss is still recorded, from the audit trail alone."""
    run_id, dag_id = run.get("dag_run_id") or run.get("run_id"), run.get("dag_id")
    try:
        from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

        found = RuntimeTaskInstance.get_task_states(dag_id=str(dag_id), run_ids=[str(run_id)])
    except Exception as exc:  # no supervisor channel, or the API server did not answer
        log.warning("the task states of %s/%s could not be read: %s", dag_id, run_id, type(exc).__name__)
        return None
    return {task: str(state) for task, state in (found.get(str(run_id)) or {}).items()}


def record_miss(rto_slo_s: int, run: dict[str, Any], states: dict[str, str] | None = None,
                topology: Topology | None = None, audit: AuditStore | None = None) -> dict[str, Any] | None:
    """Audit (and alert) the miss if the run's flow has this SLO; returns what was recorded, None if not its own."""
    topology = topology or load_topology()
    flow_name = str((run.get("conf") or {}).get("flow"))
    try:
        slo = topology.flow(flow_name).rto_slo_s
    except Refused:
        slo = DEFAULT_RTO_SLO_S  # a run refused for its flow still has a deadline: the default one
    if slo != rto_slo_s:
        return None
    audit = audit or AuditStore.from_env()
    run_id, dag_id = str(run.get("dag_run_id") or run.get("run_id")), run.get("dag_id")
    where = where_the_run_is(audit, run_id, states)
    rb = Runbook(RunInfo(run_id=run_id, dag_id=dag_id, task_id=None, user=run.get("triggering_user_name")), audit)
    message = (f"{dag_id} of {cut(flow_name)} missed its RTO objective of {rto_slo_s} s (queued at "
               f"{run.get('queued_at')}); {where['text']}")
    with rb.step("deadline.missed", flow_name) as step:
        step.note(rto_slo_s=rto_slo_s, queued_at=str(run.get("queued_at")), **where)
    log.error("RTO MISSED %s", message)
    post_alert(Alert(dag_id=dag_id, run_id=run_id, task_id=where.get("task_id"), message=message,
                     details={"rto_slo_s": rto_slo_s, **where}), None, log)
    return {"message": message, **where}


def where_the_run_is(audit: AuditStore, run_id: str, states: dict[str, str] | None) -> dict[str, Any]:
    """The step the run is in: the tasks Airflow shows at work (when it could be asked), and the run's last
    recorded step in the audit trail."""
    last = audit.events(run_id=run_id, limit=1, newest_first=True)
    at_work = {t: s for t, s in (states or {}).items() if s in IN_PROGRESS}
    out: dict[str, Any] = {"task_id": None, "tasks": at_work, "last_step": None}
    parts = []
    if at_work:
        out["task_id"] = min(at_work, key=lambda t: list(IN_PROGRESS).index(at_work[t]))
        parts.append("it is in " + ", ".join(f"task {t} ({IN_PROGRESS[s]})" for t, s in sorted(at_work.items())))
    elif states is not None:
        parts.append("no task of it is at work now")
    if last:
        e = last[0]
        out["last_step"] = e.action
        out["task_id"] = out["task_id"] or e.task_id
        parts.append(f"its last recorded step is {e.action} ({e.result}) in task {e.task_id}")
    else:
        parts.append("it has recorded no step yet")
    out["text"] = "; ".join(parts)
    return out
