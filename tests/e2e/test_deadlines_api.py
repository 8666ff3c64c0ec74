"""RTO deadlines of runs that ended, through a real `airflow standalone` (scheduler, triggerer; no mocks).

Airflow prunes a run's deadlines only when it succeeds: those of a failed run — a failover rejected at approval, a
failback refused at validate_params — still pass later, and the scheduler queues their callback for the triggerer.
mirrorbook's callback then records nothing and posts nothing: the run was not "still going" past its objective.
(A run still going when its deadline passes is audited as `deadline.missed`: tests/e2e/test_approval_api.py.)
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from datetime import datetime, timedelta

import pytest

from tests.e2e.conftest import E2E, E2E_RTO_SLO_S

pytestmark = [pytest.mark.e2e, pytest.mark.airflow, pytest.mark.integration]


def _when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _deadlines(e2e: E2E, dag_id: str, run_id: str) -> list[tuple[bool, str | None]]:
    """(missed, its callback's state) of each deadline of the run, from Airflow's own metadata database."""
    with sqlite3.connect(e2e.airflow.home / "airflow.db", timeout=30) as db:
        return [(bool(missed), state) for missed, state in db.execute(
            "SELECT d.missed, c.state FROM deadline d JOIN dag_run r ON d.dagrun_id = r.id "
            "JOIN callback c ON d.callback_id = c.id WHERE r.dag_id = ? AND r.run_id = ?", (dag_id, run_id))]


def test_a_run_that_ended_before_its_deadline_misses_nothing(e2e: E2E):
    run_id = f"e2e-ended-{uuid.uuid4().hex[:8]}"
    with e2e.client() as api:
        # A failback refused before anything happens (a flow the topology does not have): the run fails at once.
        r = api.post("/api/v2/dags/mm2_failback/dagRuns",
                     json={"dag_run_id": run_id, "logical_date": None, "conf": {"flow": "NOPE->B"}})
        assert r.status_code == 200, r.text  # created unpaused: the run starts without an unpause
        deadline = time.monotonic() + 180
        while (run := api.get(f"/api/v2/dags/mm2_failback/dagRuns/{run_id}").json())["state"] not in (
                "success", "failed") and time.monotonic() < deadline:
            time.sleep(1)
    assert run["state"] == "failed", run
    ended_after = _when(run["end_date"]) - _when(run["queued_at"])
    assert ended_after < timedelta(seconds=E2E_RTO_SLO_S), f"the run took {ended_after} to fail: not before its RTO"

    # The scheduler marks the deadline missed once its time has passed, and the triggerer runs the callback.
    deadline = time.monotonic() + E2E_RTO_SLO_S + 180
    while (found := _deadlines(e2e, "mm2_failback", run_id)) and not all(
            missed and state == "success" for missed, state in found) and time.monotonic() < deadline:
        time.sleep(2)
    assert found and all(missed and state == "success" for missed, state in found), \
        (found, e2e.airflow.log_tail(3000))
    # ... and recorded nothing: the run had ended (no webhook is configured here: tests/unit/test_deadlines.py
    # shows that such a callback posts nothing either).
    assert e2e.audit.events(run_id=run_id, action="step.deadline.missed") == []
