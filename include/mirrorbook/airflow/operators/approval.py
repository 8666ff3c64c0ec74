"""ApprovePlanOperator: a human approves a runbook's plan before its first mutation.

Built on the standard provider's ApprovalOperator: on Airflow 3.3 the task waits in the AWAITING_INPUT
state (no worker slot, no trigger) and the request is under "Required Actions" in the UI and at
`/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/-1/hitlDetails` in the REST API. An answer
given there resumes the task at once (the API's handler schedules it); no answer by `response_timeout`
is answered by the scheduler with the defaults — Reject — marked timed out. What the request shows and
how the answer is recorded is runbooks/approval.py's; this module only gathers it and adapts it to Airflow.

A rejection or no answer within the timeout fails this task for good (no retry asks again) and with it
the run: downstream tasks never start, the unlock teardown and the report still run. The provider's
default — reject skips downstream tasks and the run succeeds — would make a rejected failover look like a
successful one to whatever triggered it over the API.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.providers.standard.triggers.hitl import HITLTrigger
from airflow.sdk.timezone import utcnow

from mirrorbook.airflow.operators.base import RunbookTask, guarded, run_info
from mirrorbook.connect.models import ConnectorOffsets
from mirrorbook.replication import backend_for
from mirrorbook.runbooks import approval, move as moves
from mirrorbook.runbooks.rpo import rpo_lower_bound
from mirrorbook.runbooks.approval import APPROVE, REJECT, Answer, Request
from mirrorbook.runbooks.params import MoveParams, OffsetsParams
from mirrorbook.core.engine import Runbook
from mirrorbook.topology import ApprovalPolicy

assert (ApprovalOperator.APPROVE, ApprovalOperator.REJECT) == (APPROVE, REJECT)

# Who dag.test() — and so `airflow dags test` — names as a run's triggering user.
DAG_TEST_USER = "dag_test"
NOBODY_ANSWERS_HERE = (
    "This run was started by dag.test() / `airflow dags test`: nothing in this process answers the approval, and "
    "no scheduler times it out. It waits until someone answers it under Required Actions of an Airflow API server "
    "on this metadata database (the request times out after %s s only under a scheduler). To run unattended, "
    "pass approval=skip: airflow dags test <dag> -c '{..., \"approval\": \"skip\"}'.")


class ApprovePlanOperator(RunbookTask[OffsetsParams | MoveParams], ApprovalOperator):
    """Asks for approval of the run's plan (or records why it does not ask: dry run, `approval=skip`)."""

    ui_color = "#fdf0d5"
    # Building the request: reading the plan and the clusters, and the next steps' dry run. The wait for an
    # answer is not an execution: `response_timeout` bounds it (the scheduler answers Reject at its end).
    deadline_s = 300.0

    def __init__(self, *, timeout_s: int = ApprovalPolicy().timeout_s, **kwargs: Any) -> None:
        # Unanswered in time: Airflow resumes the task with the defaults, marked timed out -> a rejection.
        super().__init__(subject="Approve the plan", defaults=REJECT, response_timeout=timedelta(seconds=timeout_s),
                         **kwargs)
        self.timeout_s = timeout_s

    def execute(self, context: Any) -> Any:
        params = self.runbook_params(context)
        rb = self.runbook(context)
        flow = params.flow_spec
        policy = params.approval_decision
        if policy[0] != "required":
            guarded(lambda: approval.record_skipped(rb, flow.name, policy))
            self.log.info("approval not asked: %s", policy[1])
            return {"approved": None, "skipped": policy[1]}
        # The answer stands for the run. A new try of this task finds what an earlier try recorded:
        # - the decision (a clear after the answer, or a retry after execute_complete recorded it): it stands;
        # - the request, answered or not: Airflow holds it, and the answer if one came. Asking again would
        #   erase that answer — the provider's request upsert clears a response — and leave the run waiting for
        #   an answer already given. Airflow 3.3.2 makes exactly that retry when the answer comes before the
        #   scheduler has handled the executor's event for the attempt that parked: it takes the resumed attempt
        #   for one changed externally, and fails it.
        # So the new try waits on the request as it is, through the provider's HITLTrigger (which reads the
        # answer Airflow holds) rather than by parking: parking on an answered request resumes the task in the
        # same instant, before the executor's event for this attempt — the same race, made certain; a trigger
        # first has to be picked up by the triggerer, and by then this attempt's event has been handled.
        decided = approval.recorded_answer(rb)
        if decided is not None:
            self.log.info("already answered (%s by %s): the answer stands for this run", decided.chosen_options,
                          decided.responder)
            return self._decided(rb, flow.name, decided)
        if approval.requested(rb):
            self.log.info("this run asked already (an earlier try): waiting on that request, as it is")
            self.defer(trigger=HITLTrigger(ti_id=context["task_instance"].id, options=self.options,
                                           defaults=self.defaults, params=self.serialized_params,
                                           multiple=self.multiple,
                                           timeout_datetime=utcnow() + timedelta(seconds=self.timeout_s)),
                       method_name="execute_complete")
        request = self.guarded_run(rb, [flow], lambda: self._request(rb, params))
        guarded(lambda: approval.record_request(rb, flow.name, request, policy, self.timeout_s))
        self.subject, self.body = request.subject, request.body
        for line in request.body.splitlines():
            self.log.info("%s", line)
        if rb.info.user == DAG_TEST_USER:
            self.log.warning(NOBODY_ANSWERS_HERE, self.timeout_s)
        return super().execute(context)  # writes the request, waits for the answer (AWAITING_INPUT)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        # No defaults would resume with an error event instead (the provider's timeout without defaults).
        answer = (Answer(timedout=True) if "error" in event else
                  Answer.model_validate({k: event[k] for k in Answer.model_fields if k in event}))
        # Recorded before anything else this attempt does: what a human answered must not be lost to a later
        # failure of this attempt (a retry then finds it, above).
        rb = Runbook(run_info(context, self.task_id), self.audit())
        self._decided(rb, self.runbook_params(context).flow_spec.name, answer)
        self.log.info("approved by %s", answer.responder)
        return super().execute_complete(context, event)

    def _decided(self, rb: Runbook, flow: str, answer: Answer) -> dict[str, Any]:
        """Record `answer` unless this run already did; then go on (approved) or end the run for good."""
        if approval.recorded_answer(rb) is None:
            guarded(lambda: approval.record_answer(rb, flow, answer))
        guarded(lambda: approval.stands(rb, answer))
        return {"approved": True, "responded_by": answer.responder,
                "responded_at": answer.responded_at.isoformat() if answer.responded_at else None}

    def _request(self, rb: Runbook, params: OffsetsParams | MoveParams) -> Request:
        topology, clients = self.hook.topology, self.hook.clients
        if isinstance(params, OffsetsParams):  # mm2_offsets
            action, snapshot_id = params.action, params.snapshot_id
            assert action != "list", "a listing changes nothing: no approval is asked (changes_nothing)"
            flow = params.flow_spec
            backend = backend_for(clients, flow)
            current = backend.own_offsets(params.connector)
            snapshot = (ConnectorOffsets(offsets=rb.audit.snapshot(snapshot_id).payload.get("offsets", []))
                        if action == "restore" and snapshot_id is not None else None)  # restore requires one
            calls = approval.preview(rb, [lambda dry: backend.change_own_offsets(
                dry, params.connector, action, requested=params.parsed_offsets,
                snapshot_id=snapshot_id, stop_first=params.stop_first, effect=params.effect)])
            state = backend.part_states().get(params.connector)
            return approval.offsets_request(
                flow=flow.name, part=params.connector, name=flow.connector(params.connector), action=action,
                state=state.connector.state if state else "absent", snapshot_id=snapshot_id,
                changes=approval.offset_changes(action, current, params.parsed_offsets, snapshot),
                calls=calls, effect=params.effect, timeout_s=self.timeout_s)
        move = moves.move_for(params, topology)
        plan = moves.load_plan(rb)
        other = moves.other_flow(move, topology)
        steps = [lambda dry: moves.write_offsets(dry, clients, move, plan.planned()),
                 lambda dry: moves.stop_flow(dry, clients, move, move.via)]
        if other is not None:
            steps.append(lambda dry: moves.start_flow(dry, clients, other))
        rpo = (rpo_lower_bound(rb.audit, clients, move.flow)
               if move.direction == "failover" and not move.planned else None)
        return approval.move_request(plan, lag=approval.precheck_lag(rb, move.direction),
                                     calls=approval.preview(rb, steps), rpo=rpo, timeout_s=self.timeout_s)
