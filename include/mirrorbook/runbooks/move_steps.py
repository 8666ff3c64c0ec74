"""The steps of mm2_failover and mm2_failback, each one task: a table from the step's name to what it runs, so the
operator is a few lines over it (`airflow/operators/move.py`). The direction — failover or failback — follows the
run's parameters (`Move`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable

from mirrorbook.clients import Clients
from mirrorbook.redaction import get_logger
from mirrorbook.core.engine import Runbook
from mirrorbook.runbooks import failback, failover, move_report, parity, rpo
from mirrorbook.runbooks import move as moves
from mirrorbook.runbooks.files import artifacts_dir, safe_name
from mirrorbook.runbooks.plan import TranslationPlan
from mirrorbook.runbooks.report import run_report
from mirrorbook.topology import Topology

log = get_logger(__name__)


@dataclass(frozen=True)
class StepRun:
    """What a step runs with: the run, its clients and topology, the move, and when the run was triggered."""

    rb: Runbook
    clients: Clients
    topology: Topology
    move: moves.Move
    triggered_at: datetime | None

    def say(self, text: str) -> None:
        for line in text.splitlines():
            log.info("%s", line)


def _compute(s: StepRun) -> Callable[..., Any]:
    return failover.compute_plan if s.move.direction == "failover" else failback.compute_plan


def translate(s: StepRun) -> None:
    plan = moves.translate(s.rb, s.clients, s.move, _compute(s))
    s.say(move_report.render_report(move_report.move_report(s.rb, plan, None)))


def start_other_flow(s: StepRun) -> None:
    other = moves.other_flow(s.move, s.topology)
    if other is not None:
        moves.start_flow(s.rb, s.clients, other)
    else:
        s.say("not requested: the other direction is left as it is")


def report(s: StepRun) -> dict[str, Any]:
    """The run's report: logged, written as JSON to the artifacts, listed in the audit; what XCom gets of it."""
    rb, clients, move = s.rb, s.clients, s.move
    kept = rb.progress_get(moves.PLAN_KEY)
    plan = TranslationPlan.from_stored(kept, rows=False) if kept else None
    extra: dict[str, Any] = {}
    if move.direction == "failover" and not move.planned and not rb.dry_run:
        extra["rpo"] = rpo.for_failover(rb, clients, move.flow, s.triggered_at)
    if move.direction == "failback" and not rb.dry_run:
        extra["divergence"] = failback.run_divergence(rb, clients, move.flow)
        if (figures := failback.run_rpo(rb, clients, move.flow)) is not None:
            extra["rpo"] = figures
    if not rb.dry_run:
        extra["proof"] = parity.move_proof(rb, plan)
    run = run_report(rb.audit, rb.info.run_id)
    extra["mutating_calls"] = run["mutating_calls"]
    extra["planned_calls"] = run["planned_calls"]
    flows = [f for f in (move.flow, move.via, s.topology.reverse_of(move.flow)) if f]
    built = move_report.move_report(rb, plan, s.triggered_at, extra, flows)
    s.say(move_report.render_report(built) + "\n" + run["text"])
    path = artifacts_dir() / f"{move.direction}-{safe_name(rb.info.run_id)}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(move_report.report_json(built))
    rb.audit.record_artifact(f"{move.direction}-report", rb.info.run_id, str(path),
                             {k: built.get(k) for k in ("rto_s", "plan", "rpo", "divergence", "flow", "mode")})
    return move_report.for_xcom(built, path)


# step -> (what it runs, its own deadline in seconds: its waits — a connector stop waits up to 120 s, three
# connectors — and its reads — precise translation at a thousand groups —, plus a margin)
STEPS: dict[str, tuple[Callable[[StepRun], Any], float]] = {
    "precheck": (lambda s: moves.precheck(s.rb, s.clients, s.move), 300),
    "translate": (translate, 1800),
    "write_offsets": (lambda s: moves.write_offsets(s.rb, s.clients, s.move, moves.load_offsets(s.rb)), 900),
    "verify": (lambda s: moves.verify_offsets(s.rb, s.clients, s.move, moves.load_offsets(s.rb)), 300),
    "stop_flow": (lambda s: moves.stop_flow(s.rb, s.clients, s.move, s.move.via), 600),
    "confirm_stopped": (lambda s: moves.confirm_stopped(s.rb, s.clients, s.move, s.move.via), 420),
    "start_other_flow": (start_other_flow, 600),
    "report": (report, 600),
}
