"""Approval and RTO deadlines through the REST API of a real `airflow standalone` (scheduler, triggerer, API
server; no mocks).

- A planned failover, triggered over the API without `approval` (the topology's default: required), first waits
  at its gate (a consumer group still active on A) past its flow's RTO objective (E2E_RTO_SLO_S): the scheduler's
  DAG-run deadline fires and its callback audits `deadline.missed` naming that gate. Released, the run waits
  under Required Actions with its plan; rejected over the API, it fails with nothing written — no mutating call
  in mirrorbook's audit, none through the Connect proxy, no offsets committed on B — and the rejection is in the
  audit under the responder's name; Chromium shows the plan on Airflow's Required Actions page. New tries of the approval step (Airflow 3.3.2 retries it when an answer
  beats the scheduler to the parked attempt's executor event; here clears, which do the same on purpose)
  never ask again: before the answer, one waits on the same request; after it, the answer stands.
- An mm2_offsets alter waiting for approval is approved with the README's own commands, as written (their
  address and run swapped for this server's), and goes on. (The failover is approved in tests/dags/test_approval.py: approving this module's failover here
  would move the groups test_failover_api.py moves.)
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from mirrorbook.airflow.deadlines import IN_PROGRESS
from mirrorbook.connect import ConnectClient
from mirrorbook.kafka.admin import KafkaAdmin
from tests import docs
from tests.e2e.conftest import E2E, E2E_RTO_SLO_S
from tests.e2e.browser import keep, page, session_cookie
from tests.helpers import ActiveConsumer

pytestmark = [pytest.mark.e2e, pytest.mark.airflow, pytest.mark.integration]
SHOT = "required-actions-mm2_failover.png"  # kept in .artifacts/


def _hitl(dag_id: str, run_id: str) -> str:
    return f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/approve_plan/-1/hitlDetails"


def _trigger(api: httpx.Client, dag_id: str, run_id: str, conf: dict[str, Any]) -> None:
    api.patch(f"/api/v2/dags/{dag_id}", json={"is_paused": False}).raise_for_status()  # DAGs start paused
    r = api.post(f"/api/v2/dags/{dag_id}/dagRuns", json={"dag_run_id": run_id, "logical_date": None, "conf": conf})
    assert r.status_code == 200, r.text


def _tasks(api: httpx.Client, dag_id: str, run_id: str) -> dict[str, str]:
    tis = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances").json().get("task_instances", [])
    return {t["task_id"]: t["state"] for t in tis}


def _asked(api: httpx.Client, dag_id: str, run_id: str, timeout_s: float = 300) -> dict[str, Any]:
    """The approval request, once the run waits for it (listed among the run's required actions)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        listed = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/hitlDetails",
                         params={"response_received": False}).json().get("hitl_details", [])
        if listed:
            return listed[0]
        state = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}").json().get("state")
        assert state in ("queued", "running"), f"{dag_id} {run_id} ended ({state}) without asking for approval"
        time.sleep(2)  # one API worker serves the scheduler's tasks too: poll gently
    raise AssertionError(f"{dag_id} {run_id} did not ask for approval within {timeout_s} s: "
                         f"{_tasks(api, dag_id, run_id)}")


def _finished(api: httpx.Client, dag_id: str, run_id: str, timeout_s: float = 180) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}").json()["state"]
        if state in ("success", "failed"):
            return state
        time.sleep(2)  # one API worker serves the scheduler's tasks too: poll gently
    raise AssertionError(f"{dag_id} {run_id} still running after {timeout_s} s: {_tasks(api, dag_id, run_id)}")


def _parsed_after(api: httpx.Client, dag_id: str, since: float, timeout_s: float = 90) -> None:
    """Until the DAG processor has parsed `dag_id` after `since` (its deadlines come from the topology it read)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        parsed = api.get(f"/api/v2/dags/{dag_id}").json().get("last_parsed_time")
        if parsed and datetime.fromisoformat(parsed.replace("Z", "+00:00")).timestamp() > since:
            return
        time.sleep(1)
    raise AssertionError(f"{dag_id} not parsed again within {timeout_s} s")


def _event(e2e: E2E, run_id: str, action: str, timeout_s: float = 240) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = e2e.audit.events(run_id=run_id, action=action)
        if found:
            return found[-1]
        time.sleep(1)
    raise AssertionError(f"no {action} in the audit of {run_id} within {timeout_s} s:\n{e2e.airflow.log_tail(3000)}")


def _clear(api: httpx.Client, dag_id: str, run_id: str, task_id: str) -> None:
    r = api.post(f"/api/v2/dags/{dag_id}/clearTaskInstances",
                 json={"dag_run_id": run_id, "task_ids": [task_id], "dry_run": False, "only_failed": False,
                       "include_downstream": True, "reset_dag_runs": True})
    assert r.status_code == 200, r.text


def _waiting(api: httpx.Client, dag_id: str, run_id: str, task_id: str, try_number: int,
             timeout_s: float = 180) -> str:
    """Until that try of the task waits (a new try of the approval waits through a trigger: deferred)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ti = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}").json()
        if ti.get("try_number") == try_number and ti.get("state") in ("deferred", "awaiting_input"):
            return str(ti["state"])
        time.sleep(2)
    raise AssertionError(f"{task_id} try {try_number} not waiting within {timeout_s} s: {ti}")


def _connectors(e2e: E2E, scratch: Any) -> dict[str, str]:
    """The state of each of the flow's connectors, read from Connect itself (not through the proxy)."""
    with ConnectClient(e2e.stack.connect_settings("B")) as connect:
        return {name: connect.status(name).connector.state for _, name in scratch.flow.connectors.items()}


def _when(stamp: str | None) -> datetime | None:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")) if stamp else None


def _pending(api: httpx.Client, dag_id: str, run_id: str) -> list[dict[str, Any]]:
    return api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/hitlDetails",
                   params={"response_received": False}).json().get("hitl_details", [])


def test_a_failover_past_its_rto_at_a_gate_then_rejected_writes_nothing_and_its_answer_stands(e2e: E2E,
                                                                                              tmp_path: Path):
    scratch = e2e.failover
    bootstrap_a = e2e.stack.kafka_config("A")
    admin_b = KafkaAdmin(e2e.stack.kafka_config("B"))
    run_id = f"e2e-approval-reject-{uuid.uuid4().hex[:8]}"
    committed_before, connectors_before = admin_b.committed_offsets(scratch.groups), _connectors(e2e, scratch)
    with e2e.client() as api:
        _parsed_after(api, "mm2_failover", Path(e2e.airflow.env["MIRRORBOOK_TOPOLOGY"]).stat().st_mtime)
        changes_before = len([c for c in e2e.proxy.calls() if c.method != "GET"])
        with ActiveConsumer(bootstrap_a, scratch.groups[0], [scratch.topic]):  # the gate waits for it
            _trigger(api, "mm2_failover", run_id, {"flow": scratch.flow.name, "mode": "planned", "parity": "off",
                                                   "groups": f"{re.escape(scratch.topic)}-g.*", "drain_timeout": 240})
            missed = _event(e2e, run_id, "step.deadline.missed")
        queued = datetime.fromisoformat(api.get(f"/api/v2/dags/mm2_failover/dagRuns/{run_id}").json()["queued_at"]
                                        .replace("Z", "+00:00"))

        asked = _asked(api, "mm2_failover", run_id)
        assert asked["task_instance"]["state"] == "awaiting_input" and asked["options"] == ["Approve", "Reject"]
        assert asked["subject"].startswith(f"Approve the failover of {scratch.flow.name} (planned): "
                                           f"{len(scratch.groups)} group(s)")
        for text in ("| records skipped | 0 |", "| replication lag | 0 record(s)", "× AlterConsumerGroupOffsets",
                     f"/connectors/{quote(scratch.flow.connector('source'), safe='')}/stop"):
            assert text in asked["body"], asked["body"]
        # What the approver sees in Airflow's UI: the run's Required Actions, the plan in it.
        with page(session_cookie(e2e.url, e2e.token())) as tab:
            tab.navigate(f"{e2e.url}/dags/mm2_failover/runs/{run_id}/required_actions")
            shown = tab.wait_for(f"document.body.innerText.includes({json.dumps(asked['subject'])})"
                                 " && document.body.innerText.includes('records skipped')"
                                 " && document.body.innerText", timeout_s=180, what="the request and its plan")
            tab.screenshot(tmp_path / SHOT)
        keep(tmp_path / SHOT)
        for text in ("Nothing has been changed yet", "Calls it will make", "AlterConsumerGroupOffsets",
                     scratch.groups[0]):
            assert text in shown, text
        # A new try while the request stands (what Airflow's retry makes): it waits on the same request.
        _clear(api, "mm2_failover", run_id, "approve_plan")
        assert _waiting(api, "mm2_failover", run_id, "approve_plan", try_number=2) == "deferred"
        [still] = _pending(api, "mm2_failover", run_id)
        assert (still["subject"], still["body"]) == (asked["subject"], asked["body"])
        answered = api.patch(_hitl("mm2_failover", run_id), json={"chosen_options": ["Reject"]})
        assert answered.status_code == 200, answered.text
        assert _finished(api, "mm2_failover", run_id) == "failed"
        first = _tasks(api, "mm2_failover", run_id)

        # A new try after the answer: the rejection stands, nobody is asked again.
        _clear(api, "mm2_failover", run_id, "approve_plan")
        assert _finished(api, "mm2_failover", run_id) == "failed"
        again = _tasks(api, "mm2_failover", run_id)
        pending = _pending(api, "mm2_failover", run_id)
        tries = api.get(f"/api/v2/dags/mm2_failover/dagRuns/{run_id}/taskInstances/approve_plan").json()
        named_tries = api.get(f"/api/v2/dags/mm2_failover/dagRuns/{run_id}/taskInstances/"
                              f"{missed.details['task_id']}/tries").json()["task_instances"]

    # The deadline fired while the run was still short of its plan (the gate held it), and names the task it was
    # in — as Airflow's own record of that task's try says: started before the miss, not ended before it. (On a
    # busy machine the run may not have reached the gate by then: the miss names the task it was in instead.)
    assert (missed.started_at - queued).total_seconds() >= E2E_RTO_SLO_S
    named = missed.details["task_id"]
    assert named in ("validate_params", "lock_flow", "precheck", "warm_proof", "wait_groups_inactive"), missed.details
    assert f"task {named} ({IN_PROGRESS[missed.details['tasks'][named]]})" in missed.details["text"]
    # Airflow's record of that task agrees: its last try had not ended by the miss. (When it started is not
    # comparable: a deferred task that resumes is queued and started again, its first start overwritten.)
    last = max(named_tries, key=lambda t: t["try_number"])
    assert last["end_date"] is None or _when(last["end_date"]) >= missed.started_at, named_tries
    if named == "wait_groups_inactive":
        assert "task wait_groups_inactive (waiting (deferred to the triggerer))" in missed.details["text"]
    assert missed.details["rto_slo_s"] == E2E_RTO_SLO_S and missed.user == "admin"
    # Rejected: nothing was written, and the answer stood for the second try.
    for tis in (first, again):
        assert tis["approve_plan"] == "failed" and tis["write_offsets"] == "upstream_failed", tis
        assert tis["unlock_flow"] == "success", tis
    assert tries["try_number"] >= 3 and pending == []
    assert e2e.audit.count_mutating(run_id) == 0
    assert [c for c in e2e.proxy.calls() if c.method != "GET"][changes_before:] == []
    assert admin_b.committed_offsets(scratch.groups) == committed_before
    assert _connectors(e2e, scratch) == connectors_before
    [request] = e2e.audit.events(run_id=run_id, action="step.approval.request")  # asked once
    [decision] = e2e.audit.events(run_id=run_id, action="step.approval.decision")  # answered once
    assert (decision.user, decision.result, decision.details["answer"]) == ("admin", "refused", ["Reject"])
    assert "rejected by admin: the run ends here; nothing was changed." in decision.error
    assert request.details["because"] == "the topology's approval.failover is required"


def test_the_readmes_approval_commands_approve_a_waiting_run(e2e: E2E):
    flow = e2e.ops.flow
    run_id = f"e2e-approval-ok-{uuid.uuid4().hex[:8]}"
    heartbeat = {"offsets": [{"partition": {"sourceClusterAlias": flow.source, "targetClusterAlias": flow.target},
                              "offset": {"offset": 0}}]}  # as MM2 keeps it: the change is approved, and changes nothing
    with e2e.client() as api:
        _trigger(api, "mm2_offsets", run_id, {"flow": flow.name, "connector": "heartbeat", "action": "alter",
                                              "offsets": heartbeat, "parity": "off", "approval": "required"})
        asked = _asked(api, "mm2_offsets", run_id)
        assert asked["subject"].startswith(f"Approve alter of {flow.connector('heartbeat')}'s offsets")

        block = docs.block("tests/e2e/test_approval_api.py::test_the_readmes_approval_commands_approve_a_waiting_run"
                           ).text
        first = block.splitlines()[0]
        assert first.startswith("DAG=mm2_failover RUN=")
        script = block.replace(first, f"DAG=mm2_offsets RUN={run_id}", 1).replace("http://localhost:8080", e2e.url)
        done = subprocess.run(["bash", "-euc", script], capture_output=True, text=True, timeout=60,
                              env={"TOKEN": e2e.token(), "PATH": "/usr/bin:/bin"})
        assert done.returncode == 0, done.stderr
        assert asked["subject"] in done.stdout  # what it will change, printed before answering
        assert '"chosen_options":["Approve"]' in done.stdout.replace(" ", "")
        assert _finished(api, "mm2_offsets", run_id) == "success"

    [decision] = e2e.audit.events(run_id=run_id, action="step.approval.decision")
    assert (decision.user, decision.result, decision.details["answer"]) == ("admin", "noop", ["Approve"])
    assert [e.result for e in e2e.audit.events(run_id=run_id, action="step.offsets.alter")] == ["noop"]
