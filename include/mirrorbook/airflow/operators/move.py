"""GroupMoveOperator: one step of mm2_failover or mm2_failback (precheck, translate, write, verify, ...)."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Iterator

from mirrorbook.airflow.operators.base import MirrorbookBaseOperator, guarded
from mirrorbook.runbooks import failback, failover, move as moves, move_report, parity, rpo, standing
from mirrorbook.runbooks.engine import Runbook
from mirrorbook.runbooks.files import artifacts_dir, safe_name

# Each step's own deadline (s): its waits (a connector stop waits up to 120 s, three connectors) and
# its reads (precise translation at a thousand groups), plus a margin.
STEP_DEADLINES = {"precheck": 300, "translate": 1800, "write_offsets": 900, "verify": 300, "stop_flow": 600,
                  "confirm_stopped": 420, "start_other_flow": 600, "report": 600}
STEPS = tuple(STEP_DEADLINES)


class GroupMoveOperator(MirrorbookBaseOperator):
    """Runs `step` of mm2_failover or mm2_failback (the direction follows the runbook's parameters)."""

    def __init__(self, *, step: str, **kwargs: Any) -> None:
        if step not in STEPS:
            raise ValueError(f"step must be one of {STEPS}")
        self.step = step
        super().__init__(**kwargs)

    def task_deadline_s(self, kwargs: dict[str, Any]) -> float:
        return float(STEP_DEADLINES[self.step])

    def execute(self, context: Any) -> Any:
        topology = self.hook.topology
        params = self.runbook_params(context)
        move = guarded(lambda: moves.move_for(params, topology))
        rb = self.runbook(context)
        # The flow this step drives first: the other direction's when it starts that one.
        other = topology.reverse_of(move.flow) if move.direction == "failover" else move.flow
        flows = [other, move.via] if self.step == "start_other_flow" and other is not None else [move.via]
        with _gc_frozen():
            return self.guarded_run(rb, flows, lambda: self._run(context, topology, params, move, rb),
                                    standing.move_rerun(rb, self.step, move.to_cluster))

    def _run(self, context: Any, topology: Any, params: Any, move: moves.Move, rb: Runbook) -> Any:
        clients = self.hook.clients
        compute = failover.compute_plan if move.direction == "failover" else failback.compute_plan
        if self.step == "precheck":
            moves.precheck(rb, clients, move)
        elif self.step == "translate":
            plan = moves.translate(rb, clients, move, compute)
            self.log.info("%s", move_report.render_report(move_report.move_report(rb, plan, None)))
        elif self.step == "write_offsets":
            moves.write_offsets(rb, clients, move, moves.load_offsets(rb))
        elif self.step == "verify":
            moves.verify_offsets(rb, clients, move, moves.load_offsets(rb))
        elif self.step == "stop_flow":
            moves.stop_flow(rb, clients, move, move.via)
        elif self.step == "confirm_stopped":
            moves.confirm_stopped(rb, clients, move, move.via)
        elif self.step == "start_other_flow":
            self._start_other(rb, clients, move, topology)
        else:
            return self._report(context, rb, clients, move, topology)
        return self.log_outcomes(rb)

    def _start_other(self, rb: Runbook, clients: Any, move: moves.Move, topology: Any) -> None:
        other = moves.other_flow(move, topology)
        if other is not None:
            moves.start_flow(rb, clients, other)
        else:
            self.log.info("not requested: the other direction is left as it is")

    def _report(self, context: Any, rb: Runbook, clients: Any, move: moves.Move, topology: Any) -> dict[str, Any]:
        kept = rb.progress_get(moves.PLAN_KEY)
        plan = moves.TranslationPlan.from_stored(kept, rows=False) if kept else None
        extra: dict[str, Any] = {}
        if move.direction == "failover" and not move.planned and not rb.dry_run:
            extra["rpo"] = rpo.for_failover(rb, clients, move.flow, _trigger_time(context))
        if move.direction == "failback" and not rb.dry_run:
            extra["divergence"] = failback.run_divergence(rb, clients, move.flow)
            if (figures := failback.run_rpo(rb, clients, move.flow)) is not None:
                extra["rpo"] = figures
        if not rb.dry_run:
            extra["proof"] = parity.move_proof(rb, plan)
        from mirrorbook.runbooks.report import run_report

        run = run_report(rb.audit, rb.info.run_id)
        extra["mutating_calls"] = run["mutating_calls"]
        extra["planned_calls"] = run["planned_calls"]
        report = move_report.move_report(rb, plan, _trigger_time(context), extra,
                                         [f for f in (move.flow, move.via, topology.reverse_of(move.flow)) if f])
        text = move_report.render_report(report)
        for line in (text + "\n" + run["text"]).splitlines():
            self.log.info("%s", line)
        path = artifacts_dir() / f"{move.direction}-{safe_name(rb.info.run_id)}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(move_report.report_json(report))
        rb.audit.record_artifact(f"{move.direction}-report", rb.info.run_id, str(path),
                                 {k: report.get(k) for k in ("rto_s", "plan", "rpo", "divergence", "flow", "mode")})
        return move_report.for_xcom(report, path)


@contextmanager
def _gc_frozen() -> Iterator[None]:
    """The objects the task process holds before the step (Airflow's, the DAG's) left out of the cyclic GC's passes
    while it runs: a step at a thousand groups makes hundreds of thousands of small objects, each collection of the
    oldest generation walked all of the process's (gc.freeze; unfrozen after — unless the process had frozen objects
    of its own already, as a forking executor's worker may: those stay as they were, with ours)."""
    had = gc.get_freeze_count()
    gc.freeze()
    try:
        yield
    finally:
        if not had:
            gc.unfreeze()


def _trigger_time(context: Any) -> datetime | None:
    dag_run = context["dag_run"]
    return getattr(dag_run, "queued_at", None) or getattr(dag_run, "start_date", None)

