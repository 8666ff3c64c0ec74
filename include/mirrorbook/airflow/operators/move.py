"""GroupMoveOperator: one step of mm2_failover or mm2_failback (precheck, translate, write, verify, ...)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from mirrorbook.airflow.operators.base import MirrorbookBaseOperator, guarded, run_info
from mirrorbook.runbooks import failback, failover, move as moves
from mirrorbook.runbooks.engine import Runbook
from mirrorbook.runbooks.files import artifacts_dir, safe_name
from mirrorbook.runbooks.params import FailbackParams, FailoverParams, parse

STEPS = ("precheck", "translate", "write_offsets", "verify", "stop_flow", "start_other_flow", "report")


class GroupMoveOperator(MirrorbookBaseOperator):
    """Runs `step` of a `direction` ("failover" | "failback") with the DAG run's parameters."""

    template_fields = ()

    def __init__(self, *, direction: str, step: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if step not in STEPS:
            raise ValueError(f"step must be one of {STEPS}")
        self.direction, self.step = direction, step

    def execute(self, context: Any) -> Any:
        return guarded(lambda: self._run(context))

    def _run(self, context: Any) -> Any:
        topology = self.hook.topology
        model = FailoverParams if self.direction == "failover" else FailbackParams
        params = parse(model, dict(context["params"]), topology)
        move = (moves.failover_move if self.direction == "failover" else moves.failback_move)(params, topology)
        rb = Runbook(run_info(context, self.task_id), self.audit(), dry_run=params.dry_run)
        clients = self.hook.clients
        compute = failover.compute_plan if self.direction == "failover" else failback.compute_plan
        if self.step == "precheck":
            moves.precheck(rb, clients, move)
        elif self.step == "translate":
            plan = moves.translate(rb, clients, move, compute)
            self.log.info("%s", failover.render_report(failover.move_report(rb, plan, None)))
        elif self.step == "write_offsets":
            moves.write_offsets(rb, clients, move, moves.load_plan(rb))
        elif self.step == "verify":
            moves.verify_offsets(rb, clients, move, moves.load_plan(rb))
        elif self.step == "stop_flow":
            moves.stop_flow(rb, clients, move, move.via)
        elif self.step == "start_other_flow":
            self._start_other(rb, clients, move, params, topology)
        else:
            return self._report(context, rb, clients, move)
        return self.log_outcomes(rb)

    def _start_other(self, rb: Runbook, clients: Any, move: moves.Move, params: Any, topology: Any) -> None:
        if self.direction == "failover" and params.start_reverse_flow:
            moves.start_flow(rb, clients, topology.reverse_of(move.flow))
        elif self.direction == "failback" and params.restart_flow:
            moves.start_flow(rb, clients, move.flow)
        else:
            self.log.info("not requested: the other direction is left as it is")

    def _report(self, context: Any, rb: Runbook, clients: Any, move: moves.Move) -> dict[str, Any]:
        kept = rb.progress_get(moves.PLAN_KEY)
        plan = moves.TranslationPlan.model_validate(kept) if kept else None
        extra: dict[str, Any] = {}
        if self.direction == "failover" and not move.planned and not rb.dry_run:
            extra["rpo"] = failover.rpo_estimate(rb.audit, clients, move.flow)
        if self.direction == "failback" and not rb.dry_run:
            extra["divergence"] = failback.divergence(clients, move.flow)
        from mirrorbook.runbooks.report import run_report

        run = run_report(rb.audit, rb.info.run_id)
        extra["mutating_calls"] = run["mutating_calls"]
        extra["planned_calls"] = run["planned_calls"]
        report = failover.move_report(rb, plan, _trigger_time(context), extra)
        text = failover.render_report(report)
        for line in (text + "\n" + run["text"]).splitlines():
            self.log.info("%s", line)
        path = artifacts_dir() / f"{self.direction}-{safe_name(rb.info.run_id)}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=2, default=str))
        rb.audit.record_artifact(f"{self.direction}-report", rb.info.run_id, str(path),
                                 {k: report.get(k) for k in ("rto_s", "plan", "rpo", "divergence", "flow", "mode")})
        return {k: v for k, v in report.items() if k != "rows"} | {"report_path": str(path)}


def _trigger_time(context: Any) -> datetime | None:
    dag_run = context["dag_run"]
    return getattr(dag_run, "queued_at", None) or getattr(dag_run, "start_date", None)

