"""RTO deadlines: a failover or failback that runs past its flow's `rto_slo_s` (from the moment the run was
queued) is audited as `deadline.missed`, naming where the run is, and alerted (webhook when configured).

Airflow's DAG-run deadlines are evaluated by the scheduler (never by dag.test()) and their interval is fixed
when the DAG is parsed, while a run picks its flow when it is triggered. So a runbook DAG carries one
`DeadlineAlert` per distinct `rto_slo_s` of the topology's flows (as the DAG processor read it); when one
fires, its callback acts only if the run's flow has that SLO — the others are some other flow's.
The callback runs in the triggerer (an AsyncCallback); it reads the topology and the audit store like the
runbooks do, never Airflow's database.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

from airflow.sdk import AsyncCallback, DeadlineAlert, DeadlineReference

from mirrorbook.airflow.notifiers import Alert, post_alert
from mirrorbook.audit import AuditStore
from mirrorbook.bounds import cut
from mirrorbook.errors import Refused
from mirrorbook.runbooks.engine import RunInfo, Runbook
from mirrorbook.topology import DEFAULT_RTO_SLO_S, Topology, load_topology

log = logging.getLogger(__name__)


def rto_deadlines(topology: Topology | None) -> list[DeadlineAlert]:
    """One alert per distinct SLO of the topology's flows (the default one without a topology)."""
    slos = sorted({f.rto_slo_s for f in topology.flows} if topology else set()) or [DEFAULT_RTO_SLO_S]
    return [DeadlineAlert(reference=DeadlineReference.DAGRUN_QUEUED_AT, interval=timedelta(seconds=s),
                          callback=AsyncCallback(rto_missed, kwargs={"rto_slo_s": s}), name=f"rto-{s}s")
            for s in slos]


async def rto_missed(rto_slo_s: int, context: dict[str, Any], **_: Any) -> None:
    """The deadline callback (Airflow passes `context` with the run as the REST API shows it)."""
    await asyncio.to_thread(record_miss, rto_slo_s, context.get("dag_run") or {})


def record_miss(rto_slo_s: int, run: dict[str, Any], topology: Topology | None = None,
                audit: AuditStore | None = None) -> dict[str, Any] | None:
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
    run_id, dag_id = run.get("dag_run_id") or run.get("run_id"), run.get("dag_id")
    where = _where(audit, str(run_id))
    rb = Runbook(RunInfo(run_id=str(run_id), dag_id=dag_id, task_id=None, user=run.get("triggering_user_name")),
                 audit)
    message = (f"{dag_id} of {cut(flow_name)} missed its RTO objective of {rto_slo_s} s (queued at "
               f"{run.get('queued_at')}); {where['text']}")
    with rb.step("deadline.missed", flow_name) as step:
        step.note(rto_slo_s=rto_slo_s, queued_at=str(run.get("queued_at")), **where)
    log.error("RTO MISSED %s", message)
    post_alert(Alert(dag_id=dag_id, run_id=str(run_id), task_id=where.get("task_id"), message=message,
                     details={"rto_slo_s": rto_slo_s, **where}), None, log)
    return {"message": message, **where}


def _where(audit: AuditStore, run_id: str) -> dict[str, Any]:
    """The step the run is in, as far as its audit trail shows: the task of its newest event, and that event."""
    last = audit.events(run_id=run_id, limit=1, newest_first=True)
    if not last:
        return {"task_id": None, "last_step": None, "text": "it has recorded no step yet"}
    e = last[0]
    waiting = " (waiting for approval)" if e.action == "step.approval.request" else ""
    return {"task_id": e.task_id, "last_step": e.action,
            "text": f"it is in task {e.task_id}{waiting}; its last recorded step is {e.action} ({e.result})"}
