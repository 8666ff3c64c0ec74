"""validate_params, the first task of every runbook, under dag.test() on the session devstack.

- The run's conf is checked as it was sent, whatever Airflow made of it: with Airflow's
  `[core] dag_run_conf_overrides_params = False`, Airflow drops the conf without a word and the run takes the
  form's defaults (`dry_run=false`); the run is refused, naming the setting — and a misspelled key in it still
  names the key.
- A groups pattern that matches nothing: a real failover is refused here, before the lock, and a dry run
  plans on with the warning in validate_params' log and in its plan.
"""

from __future__ import annotations

import uuid

import pytest

from mirrorbook.audit import AuditStore
from tests.faultproxy import FaultProxy

pytestmark = [pytest.mark.airflow, pytest.mark.integration]
SETTING = "AIRFLOW__CORE__DAG_RUN_CONF_OVERRIDES_PARAMS"


def _tis(run) -> dict:
    return {ti.task_id: ti for ti in run.dag_run.get_task_instances()}


def _refused_first(run) -> None:
    """Failed at validate_params on its first try (never retried), before the lock and before any step."""
    tis = _tis(run)
    assert run.state == "failed"
    assert str(tis["validate_params"].state) == "failed" and tis["validate_params"].try_number == 1
    assert str(tis["lock_flow"].state) == "upstream_failed"
    assert run.mutating_calls() == 0


@pytest.mark.parametrize("extra,needle", [
    ({}, "Airflow's [core] dag_run_conf_overrides_params is False: the run's conf ("),
    ({"dryrun": True}, "unknown parameter 'dryrun' — did you mean 'dry_run'?"),
], ids=["conf-ignored", "misspelled-key"])
def test_a_conf_airflow_would_ignore_is_refused_naming_the_setting(run_dag, dag_scratch, connect_b_url, use_topology,
                                                                   monkeypatch, audit: AuditStore, extra, needle):
    # Airflow reads its settings from the environment on every lookup: dag.test()'s tasks, in this process,
    # see the setting as a deployment would.
    monkeypatch.setenv(SETTING, "False")
    conf = {"flow": dag_scratch.flow.name, "action": "reset", "stop_first": True, "dry_run": True, **extra}
    with FaultProxy(connect_b_url) as proxy:
        use_topology(dag_scratch.topology, connect_url=proxy.url)
        run = run_dag("mm2_offsets", conf)
    _refused_first(run)
    assert needle in run.failure(), run.failure()
    if not extra:
        assert "the run would take the form's defaults (dry_run=false among them); nothing was done" in run.failure()
        assert "AIRFLOW__CORE__DAG_RUN_CONF_OVERRIDES_PARAMS=True" in run.failure()
    # Not a call, not a snapshot: the form's defaults (a `list` of the first flow) did not run either.
    assert proxy.calls() == []
    assert audit.snapshots(run_id=run.run_id) == []


def test_the_same_conf_runs_when_airflow_applies_it(run_dag, dag_scratch, monkeypatch):
    monkeypatch.setenv(SETTING, "True")
    run = run_dag("mm2_offsets", {"flow": dag_scratch.flow.name, "action": "reset", "stop_first": True,
                                  "dry_run": True})
    assert run.state == "success", run.failure()
    assert run.mutating_calls() == 0


def _nothing(tag: str) -> dict:
    return {"flow": "A->B", "groups": f"{tag}-nothing-.*", "mode": "planned", "drain_timeout": 30}


def test_a_groups_pattern_matching_nothing_is_refused_at_validate_params(run_dag, audit: AuditStore):
    tag = f"nm{uuid.uuid4().hex[:6]}"
    run = run_dag("mm2_failover", _nothing(tag))
    _refused_first(run)
    assert f'No consumer group matches "{tag}-nothing-.*" on A' in run.failure()
    assert [e for e in run.events() if e.action == "step.lock.acquire"] == []  # refused before the lock


def test_a_dry_run_with_a_groups_pattern_matching_nothing_plans_and_warns(run_dag):
    tag = f"nm{uuid.uuid4().hex[:6]}"
    run = run_dag("mm2_failover", {**_nothing(tag), "dry_run": True})
    assert run.state == "success", run.failure()
    warning = f'No consumer group matches "{tag}-nothing-.*" on A: nothing to move — a real run with these ' \
              "parameters is refused"
    assert run.xcom("validate_params")["warnings"] == [warning]
    validate = [e for e in run.events(kind="step") if e.action == "step.params.validate"]
    assert validate[0].result != "refused" and validate[0].details["warnings"] == [warning]
    report = run.report()
    assert report["dry_run"] is True and report["plan"]["groups"] == 0
    assert report["notes"][0] == warning  # in the dry-run plan
    assert run.mutating_calls() == 0
