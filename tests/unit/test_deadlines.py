"""RTO deadlines: one alert per distinct SLO of the topology's flows, and a miss recorded only by the alert of the
run's own flow, naming where the run is. (Fired by a real scheduler: tests/e2e/test_approval_api.py.)"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import asyncio

from hypothesis import given, strategies as st

from mirrorbook.airflow.deadlines import ended_in_time, record_miss, rto_deadlines, rto_missed, task_states, where_the_run_is
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
    audit.record(run_id="r1", dag_id="mm2_failover", task_id="precheck", action="step.failover.precheck",
                 kind="step", result="ok", mutating=False, flow="A->B")
    run = {"dag_run_id": "r1", "dag_id": "mm2_failover", "conf": {"flow": "A->B"}, "triggering_user_name": "ops",
           "queued_at": "2026-11-23T17:00:00+00:00"}
    # As Airflow shows the run: a gate waits (deferred, it records nothing until it is done), the proof warms.
    states = {"precheck": "success", "wait_groups_inactive": "deferred", "warm_proof": "running",
              "wait_replication_drained": None, "write_offsets": None}

    assert record_miss(300, run, states, SLOW, audit) is None  # the 300 s alert is B->A's; A->B's is 60 s
    done = record_miss(60, run, states, SLOW, audit)

    assert done is not None and done["message"] == (
        "mm2_failover of A->B missed its RTO objective of 60 s (queued at 2026-11-23T17:00:00+00:00); it is in task "
        "wait_groups_inactive (waiting (deferred to the triggerer)), task warm_proof (running); its last recorded "
        "step is step.failover.precheck (ok) in task precheck")
    [event] = audit.events(run_id="r1", action="step.deadline.missed")
    assert (event.user, event.details["rto_slo_s"], event.details["task_id"]) == ("ops", 60, "wait_groups_inactive")


def test_without_airflows_task_states_the_audit_trail_says_where_the_run_is(tmp_path: Path) -> None:
    audit = AuditStore(f"sqlite:///{tmp_path / 'a.db'}")
    run = {"dag_run_id": "r2", "dag_id": "mm2_failover", "conf": {"flow": "A->B"}}
    assert task_states(run) is None  # no triggerer channel here: asked, not answered, and said so in the log
    assert record_miss(60, run, None, SLOW, audit)["text"] == "it has recorded no step yet"
    audit.record(run_id="r2", dag_id="mm2_failover", task_id="approve_plan", action="step.approval.request",
                 kind="step", result="noop", mutating=False, flow="A->B")
    assert where_the_run_is(audit, "r2", None)["task_id"] == "approve_plan"
    assert where_the_run_is(audit, "r2", {"report": "success"})["text"].startswith("no task of it is at work now")


def test_a_miss_is_posted_to_the_webhook(tmp_path: Path, monkeypatch) -> None:
    from tests.dags.test_health_check import Webhook

    audit = AuditStore(f"sqlite:///{tmp_path / 'a.db'}")
    run = {"dag_run_id": "r3", "dag_id": "mm2_failback", "conf": {"flow": "A->B"}, "queued_at": "2026-11-23T17:00:00Z"}
    with Webhook() as hook:
        monkeypatch.setenv("MIRRORBOOK_ALERT_WEBHOOK_URL", hook.url)
        done = record_miss(60, run, {"approve_plan": "awaiting_input"}, SLOW, audit)
    [alert] = hook.received
    assert (alert["dag_id"], alert["run_id"], alert["task_id"]) == ("mm2_failback", "r3", "approve_plan")
    assert alert["message"] == done["message"] and "waiting for approval (Required Actions)" in alert["message"]
    assert alert["details"]["rto_slo_s"] == 60


DUE = "2026-11-23T17:05:00+00:00"


def test_a_run_that_ended_before_its_deadline_fired_records_and_posts_nothing(tmp_path: Path, monkeypatch) -> None:
    """A failover rejected at approval fails; Airflow keeps its deadlines (it prunes them only on success) and fires
    the callback later. As the scheduler passes it — the run's state and end then, the deadline's time — nothing is
    recorded and nothing posted; a run still going, or one that ended after the deadline passed, is a miss."""
    from tests.dags.test_health_check import Webhook

    audit = AuditStore(f"sqlite:///{tmp_path / 'a.db'}")
    monkeypatch.setenv("MIRRORBOOK_AUDIT_URL", f"sqlite:///{tmp_path / 'a.db'}")
    monkeypatch.setattr("mirrorbook.airflow.deadlines.load_topology", lambda: SLOW)
    rejected = {"dag_run_id": "r4", "dag_id": "mm2_failover", "conf": {"flow": "A->B"}, "state": "failed",
                "queued_at": "2026-11-23T17:04:00+00:00", "end_date": "2026-11-23T17:04:30+00:00"}
    late = {**rejected, "dag_run_id": "r5", "end_date": "2026-11-23T17:05:02+00:00"}
    going = {**rejected, "dag_run_id": "r6", "state": "running", "end_date": None}
    with Webhook() as hook:
        monkeypatch.setenv("MIRRORBOOK_ALERT_WEBHOOK_URL", hook.url)
        for run in (rejected, late, going):
            asyncio.run(rto_missed(60, {"dag_run": run, "deadline": {"id": "d", "deadline_time": DUE}}))
    assert audit.events(run_id="r4") == [] and [a["run_id"] for a in hook.received] == ["r5", "r6"]
    assert [e.action for e in audit.events(run_id="r5")] == ["step.deadline.missed"]


@given(state=st.sampled_from(["queued", "running", "success", "failed", None]),
       end=st.one_of(st.none(), st.integers(-3600, 3600)), due=st.one_of(st.none(), st.just(0)))
def test_only_a_run_that_ended_by_its_deadline_is_spared(state, end, due) -> None:
    from datetime import datetime, timedelta, timezone

    base = datetime(2026, 11, 23, 17, 5, tzinfo=timezone.utc)
    run = {"state": state, "end_date": None if end is None else (base + timedelta(seconds=end)).isoformat()}
    deadline = {} if due is None else {"deadline_time": base.isoformat()}
    spared = ended_in_time(run, deadline)
    assert spared == (state in ("success", "failed") and (end is None or due is None or end <= 0))
