"""Bad input never changes anything, through the REST API of a real `airflow standalone`.

Every runbook DAG is triggered with an otherwise valid request whose `dry_run` is misspelled — the input
that once paused a flow for real. Each run must fail at validate_params, for good (no retry), naming the
key and the closest known one; no later task may run; the audit trail shows no mutating call; Connect saw
no change request; the connectors' states and the groups' offsets are what they were — on both sides: the
failback drives B->A, whose connectors run on Connect worker A and whose groups land on cluster A.
"""

from __future__ import annotations

import time
import uuid

import pytest

from mirrorbook.connect import ConnectClient
from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.runbooks.plan import managed_groups
from tests.e2e.conftest import E2E

pytestmark = [pytest.mark.e2e, pytest.mark.airflow, pytest.mark.integration]
DONE = ("success", "failed")


def _confs(e2e: E2E) -> dict[str, dict]:
    ops = e2e.ops.flow.name
    return {
        "mm2_pause_resume": {"flow": ops, "action": "pause", "dryrun": True},
        "mm2_offsets": {"flow": ops, "action": "reset", "stop_first": True, "dryrun": True},
        "mm2_failover": {"flow": ops, "mode": "planned", "parity": "off", "dryrun": True},
        "mm2_failback": {"flow": "A->B", "mode": "planned", "parity": "off", "dryrun": True},
        "dr_drill": {"flow": ops, "dryrun": True},
    }


def _connector_states(e2e: E2E) -> dict[str, str]:
    """Every flow's connectors, read on the Connect worker that runs them (B->A's on worker A)."""
    out = {}
    for flow in e2e.topology.flows:
        with ConnectClient(e2e.stack.connect_settings(flow.connect_cluster)) as client:
            for _, name in flow.connectors.items():
                out[f"{flow.connect_cluster}:{name}"] = client.status(name).connector.state
    return out


def _group_offsets(e2e: E2E) -> dict[str, dict]:
    """The committed offsets, on A and on B, of every group a run here could move: the failed-over scratch
    flow's, and those a failback of A->B would bring back to A (its managed groups, found on B)."""
    admins = {c: KafkaAdmin(e2e.stack.kafka_config(c)) for c in ("A", "B")}
    groups = sorted(set(e2e.failover.groups)
                    | set(managed_groups(admins["B"], e2e.topology.groups_regex(e2e.topology.flow("A->B")))))
    return {c: admin.committed_offsets(groups) for c, admin in admins.items()}


def test_a_misspelled_dry_run_changes_nothing_in_any_runbook(e2e: E2E):
    groups_before = _group_offsets(e2e)
    assert any(groups_before["A"].values()), groups_before  # the failover's groups are committed on A
    states_before = _connector_states(e2e)
    assert any(k.startswith("A:") for k in states_before), states_before  # B->A's connectors, on worker A
    changes_before = len([c for c in e2e.proxy.calls() if c.method != "GET"])
    runs = {}
    with e2e.client() as api:
        for dag_id, conf in _confs(e2e).items():
            run_id = f"e2e-bad-{dag_id}-{uuid.uuid4().hex[:6]}"
            api.patch(f"/api/v2/dags/{dag_id}", json={"is_paused": False}).raise_for_status()
            r = api.post(f"/api/v2/dags/{dag_id}/dagRuns", json={"dag_run_id": run_id, "logical_date": None,
                                                                  "conf": conf})
            assert r.status_code == 200, r.text
            runs[dag_id] = run_id
        deadline = time.monotonic() + 240
        states: dict[str, str] = {}
        while time.monotonic() < deadline and len(states) < len(runs):
            for dag_id, run_id in runs.items():
                state = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}").json()["state"]
                if state in DONE:
                    states[dag_id] = state
            time.sleep(1)
        assert states == {d: "failed" for d in runs}, (states, e2e.airflow.log_tail(3000))
        for dag_id, run_id in runs.items():
            tis = {t["task_id"]: t for t in api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")
                   .json()["task_instances"]}
            assert tis["validate_params"]["state"] == "failed", (dag_id, tis["validate_params"])
            # A validation failure is never retried: one attempt ran, and failed for good. (An attempt the
            # executor could not start — its supervisor timed out reaching the API server on a loaded machine —
            # never ran a line of ours: it has no start date, and Airflow retries it like any task.)
            tries = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/validate_params/tries").json()
            ran = [t for t in tries["task_instances"] if t["start_date"] is not None]
            assert [t["state"] for t in ran] == ["failed"], (dag_id, tries)
            assert ran[0]["try_number"] == tis["validate_params"]["try_number"], (dag_id, tries)
            assert tis["lock_flow"]["state"] == "upstream_failed", dag_id
            refused = [e for e in e2e.audit.events(run_id=run_id) if e.action == "step.params.validate"]
            assert len(refused) == 1 and refused[0].result == "refused", dag_id
            assert refused[0].error.startswith("unknown parameter 'dryrun'"), refused[0].error
            if dag_id != "dr_drill":  # a drill has no dry run: nothing close to suggest
                assert "did you mean 'dry_run'?" in refused[0].error, (dag_id, refused[0].error)
            assert e2e.audit.count_mutating(run_id) == 0, dag_id
    assert len([c for c in e2e.proxy.calls() if c.method != "GET"]) == changes_before
    assert _connector_states(e2e) == states_before
    assert _group_offsets(e2e) == groups_before
