"""RTO deadlines: one alert per distinct SLO of the topology's flows, and a miss recorded only by the alert of the
run's own flow, naming where the run is. (Fired by a real scheduler: tests/e2e/test_approval_api.py.)"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from mirrorbook.airflow.deadlines import record_miss, rto_deadlines
from mirrorbook.audit import AuditStore
from tests.unit.test_params import TOPOLOGY

SLOW = TOPOLOGY.model_copy(update={"flows": [TOPOLOGY.flows[0].model_copy(update={"rto_slo_s": 60}),
                                             TOPOLOGY.flows[1]]})


def test_one_alert_per_distinct_slo_of_the_flows() -> None:
    assert [(a.interval, a.callback.kwargs, a.name) for a in rto_deadlines(SLOW)] == [
        (timedelta(seconds=60), {"rto_slo_s": 60}, "rto-60s"), (timedelta(seconds=300), {"rto_slo_s": 300}, "rto-300s")]
    assert [a.interval for a in rto_deadlines(None)] == [timedelta(seconds=300)]  # no topology: the default


def test_a_miss_is_recorded_by_the_runs_own_flows_alert_naming_where_it_is(tmp_path: Path) -> None:
    audit = AuditStore(f"sqlite:///{tmp_path / 'a.db'}")
    audit.record(run_id="r1", dag_id="mm2_failover", task_id="approve_plan", action="step.approval.request",
                 kind="step", result="noop", mutating=False, flow="A->B")
    run = {"dag_run_id": "r1", "dag_id": "mm2_failover", "conf": {"flow": "A->B"}, "triggering_user_name": "ops",
           "queued_at": "2026-11-23T17:00:00+00:00"}

    assert record_miss(300, run, SLOW, audit) is None  # the 300 s alert is B->A's; A->B's is 60 s
    done = record_miss(60, run, SLOW, audit)

    assert done is not None and done["message"] == (
        "mm2_failover of A->B missed its RTO objective of 60 s (queued at 2026-11-23T17:00:00+00:00); it is in task "
        "approve_plan (waiting for approval); its last recorded step is step.approval.request (noop)")
    [event] = audit.events(run_id="r1", action="step.deadline.missed")
    assert (event.user, event.details["rto_slo_s"], event.details["task_id"]) == ("ops", 60, "approve_plan")
