"""ApprovePlanOperator: a human approves a runbook's plan before its first mutation.

Built on the standard provider's ApprovalOperator: on Airflow 3.3 the task waits in the AWAITING_INPUT
state (no worker slot, no trigger) and the request is under "Required Actions" in the UI and at
`/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/-1/hitlDetails` in the REST API. What it
shows and how the answer is recorded is runbooks/approval.py's; this module only adapts it to Airflow.

A rejection or no answer within the timeout fails this task for good (no retry asks again) and with it
the run: downstream tasks never start, the unlock teardown and the report still run. The provider's
default — reject skips downstream tasks and the run succeeds — would make a rejected failover look like a
successful one to whatever triggered it over the API.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator

from mirrorbook.airflow.operators.base import RunbookTask, guarded
from mirrorbook.runbooks import approval, failover, move as moves
from mirrorbook.runbooks.approval import APPROVE, REJECT, Answer, Request
from mirrorbook.runbooks.engine import Runbook
from mirrorbook.topology import ApprovalPolicy

assert (ApprovalOperator.APPROVE, ApprovalOperator.REJECT) == (APPROVE, REJECT)


class ApprovePlanOperator(RunbookTask, ApprovalOperator):
    """Asks for approval of the run's plan (or records why it does not ask: dry run, `approval=skip`)."""

    ui_color = "#fdf0d5"
    deadline_s = 300.0  # building the request: reading the plan, the connector's offsets, an RPO estimate

    def __init__(self, *, timeout_s: int = ApprovalPolicy().timeout_s, **kwargs: Any) -> None:
        # Unanswered in time: Airflow resumes the task with the defaults, marked timed out -> a rejection.
        super().__init__(subject="Approve the plan", defaults=REJECT, response_timeout=timedelta(seconds=timeout_s),
                         **kwargs)
        self.timeout_s = timeout_s

    def execute(self, context: Any) -> Any:
        params = self.runbook_params(context)
        rb = self.runbook(context)
        flow = params.flow_spec.name
        policy = params.approval_decision
        if policy[0] != "required":
            guarded(lambda: approval.record_skipped(rb, flow, policy))
            self.log.info("approval not asked: %s", policy[1])
            return {"approved": None, "skipped": policy[1]}
        request = guarded(lambda: self._request(rb, params))
        guarded(lambda: approval.record_request(rb, flow, request, policy, self.timeout_s))
        self.subject, self.body = request.subject, request.body
        for line in request.body.splitlines():
            self.log.info("%s", line)
        return super().execute(context)  # waits for the answer (AWAITING_INPUT), then execute_complete

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        answer = Answer.model_validate({k: event.get(k) for k in Answer.model_fields if k in event})
        params = self.runbook_params(context)
        rb = self.runbook(context)
        guarded(lambda: approval.record_answer(rb, params.flow_spec.name, answer))
        self.log.info("approved by %s", answer.responder)
        return {"approved": True, "responded_by": answer.responder,
                "responded_at": answer.responded_at.isoformat() if answer.responded_at else None}

    def _request(self, rb: Runbook, params: Any) -> Request:
        topology, clients = self.hook.topology, self.hook.clients
        if hasattr(params, "action"):  # mm2_offsets
            flow = params.flow_spec
            backend = clients.replication(flow)
            name = flow.connector(params.connector)
            states = {c.role: c.state for c in backend.status(with_lag=False).connectors.values()}
            return approval.offsets_request(
                rb, flow=flow.name, connector=name, action=params.action, state=states.get(params.connector, "?"),
                current=backend.own_offsets(params.connector), requested=params.parsed_offsets,
                snapshot_id=params.snapshot_id, stop_first=params.stop_first, effect=params.effect,
                timeout_s=self.timeout_s)
        move = moves.move_for(params, topology)
        plan = moves.load_plan(rb)
        rpo = None
        if move.direction == "failover" and not move.planned:
            rpo = failover.rpo_lower_bound(rb.audit, clients, move.flow)
        if move.direction == "failover":
            reverse = topology.reverse_of(move.flow)
            other = reverse.name if params.start_reverse_flow and reverse else None
        else:
            other = move.flow.name if params.restart_flow else None
        return approval.move_request(rb, plan, via=move.via.name, other_flow=other, rpo=rpo, timeout_s=self.timeout_s)
