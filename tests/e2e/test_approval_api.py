"""Approval through the REST API of a real `airflow standalone` (scheduler, API server, no mocks).

- A planned failover, triggered over the API without `approval` (the topology's default: required), waits under
  Required Actions with its plan; rejected over the API, it fails with nothing written — no mutating call in
  mirrorbook's audit, none through the Connect proxy, no offsets committed on B — and the rejection is in the
  audit under the responder's name.
- The same failover has an RTO objective of E2E_RTO_SLO_S (10 s) on its flow: while it waits, the scheduler's
  DAG-run deadline fires and its callback audits `deadline.missed`, naming where the run is.
- An mm2_offsets alter is approved with the README's own commands, as written (their address and run swapped
  for this server's): the run goes on and succeeds. (The failover is approved in tests/dags/test_approval.py:
  approving this module's failover here would move the groups test_failover_api.py moves.)
"""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from mirrorbook.kafka.admin import KafkaAdmin
from tests.e2e.conftest import E2E, E2E_RTO_SLO_S

pytestmark = [pytest.mark.e2e, pytest.mark.airflow, pytest.mark.integration]
README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


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
        time.sleep(1)
    raise AssertionError(f"{dag_id} {run_id} did not ask for approval within {timeout_s} s: "
                         f"{_tasks(api, dag_id, run_id)}")


def _finished(api: httpx.Client, dag_id: str, run_id: str, timeout_s: float = 180) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}").json()["state"]
        if state in ("success", "failed"):
            return state
        time.sleep(1)
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


def _event(e2e: E2E, run_id: str, action: str, timeout_s: float = 90) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = e2e.audit.events(run_id=run_id, action=action)
        if found:
            return found[-1]
        time.sleep(1)
    raise AssertionError(f"no {action} in the audit of {run_id} within {timeout_s} s:\n{e2e.airflow.log_tail(3000)}")


def test_a_failover_waiting_for_approval_misses_its_rto_and_rejected_writes_nothing(e2e: E2E):
    scratch = e2e.failover
    admin_b = KafkaAdmin(e2e.stack.brokers["B"].bootstrap)
    run_id = f"e2e-approval-reject-{uuid.uuid4().hex[:8]}"
    committed_before = admin_b.committed_offsets(scratch.groups)
    with e2e.client() as api:
        _parsed_after(api, "mm2_failover", Path(e2e.airflow.env["MIRRORBOOK_TOPOLOGY"]).stat().st_mtime)
        changes_before = len([c for c in e2e.proxy.calls() if c.method != "GET"])
        _trigger(api, "mm2_failover", run_id, {"flow": scratch.flow.name, "mode": "planned", "parity": "off",
                                               "groups": f"{re.escape(scratch.topic)}-g.*", "drain_timeout": 120})
        asked = _asked(api, "mm2_failover", run_id)
        assert asked["task_instance"]["state"] == "awaiting_input" and asked["options"] == ["Approve", "Reject"]
        assert asked["subject"].startswith(f"Approve the failover of {scratch.flow.name} (planned): "
                                           f"{len(scratch.groups)} group(s)")
        assert "| records skipped | 0 |" in asked["body"] and f"stop the connectors of {scratch.flow.name}" in asked["body"]

        # Past its RTO objective, the run is still waiting: the scheduler fires the deadline, the callback audits it.
        missed = _event(e2e, run_id, "step.deadline.missed")
        queued = datetime.fromisoformat(api.get(f"/api/v2/dags/mm2_failover/dagRuns/{run_id}").json()["queued_at"]
                                        .replace("Z", "+00:00"))
        assert (missed.started_at - queued).total_seconds() >= E2E_RTO_SLO_S
        earlier = [e for e in e2e.audit.events(run_id=run_id) if e.seq < missed.seq]
        assert (missed.details["last_step"], missed.details["task_id"]) == (earlier[-1].action, earlier[-1].task_id)
        assert missed.details["rto_slo_s"] == E2E_RTO_SLO_S and missed.user == "admin"

        answered = api.patch(_hitl("mm2_failover", run_id), json={"chosen_options": ["Reject"]})
        assert answered.status_code == 200, answered.text
        assert _finished(api, "mm2_failover", run_id) == "failed"
        tis = _tasks(api, "mm2_failover", run_id)

    assert tis["approve_plan"] == "failed" and tis["write_offsets"] == "upstream_failed", tis
    assert tis["unlock_flow"] == "success", tis
    assert e2e.audit.count_mutating(run_id) == 0
    assert [c for c in e2e.proxy.calls() if c.method != "GET"][changes_before:] == []
    assert admin_b.committed_offsets(scratch.groups) == committed_before
    [decision] = e2e.audit.events(run_id=run_id, action="step.approval.decision")
    assert (decision.user, decision.result, decision.details["answer"]) == ("admin", "refused", ["Reject"])
    assert "rejected by admin: the run ends here; nothing was changed." in decision.error


def _readme_block() -> str:
    [block] = [b for b in re.findall(r"```bash\n(.*?)```", README, flags=re.S) if "hitlDetails" in b]
    return block


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

        block = _readme_block()
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
