"""What changing a connector's offsets does to replication is said where it is decided: in the
mm2_offsets form (the action's description: tests/dags/test_forms.py) and, in a dry run, beside the
planned call — in the plan the run reports and in the audit trail — for an alter and for a reset."""

from __future__ import annotations

import pytest

from mirrorbook.runbooks.params import OFFSETS_EFFECTS
from tests.dags.test_offsets import body, offsets_of, state_of
from tests.helpers import eventually

pytestmark = [pytest.mark.airflow, pytest.mark.integration]
# The consequence for the target, per action, in the words the SRE reads.
SAID = {"reset": "a reset re-copies every retained record from the start (duplicates on the target)",
        "alter": "a LOWER offset re-copies records already on the target (duplicates there)"}


@pytest.fixture
def committed(dag_scratch, bootstrap_a, connect_b_url):
    from mirrorbook.devstack.workload import produce

    produce(bootstrap_a, [dag_scratch.topic], 10)
    name = dag_scratch.flow.connector("source")
    eventually(lambda: offsets_of(connect_b_url, name) == {0: 9, 1: 9}, timeout=60, what="offsets 9/9 committed")
    return dag_scratch


@pytest.mark.parametrize("action", ["reset", "alter"])
def test_a_dry_run_says_what_the_change_does_to_replication_beside_the_call(run_dag, committed, connect_b_url,
                                                                          action):
    name = committed.flow.connector("source")
    extra = {"offsets": body(committed, {0: 1})} if action == "alter" else {}
    run = run_dag("mm2_offsets", {"flow": committed.flow.name, "connector": "source", "action": action,
                                  "stop_first": True, "dry_run": True, **extra})
    assert run.state == "success", run.failure()
    planned = {e.action: e for e in run.events(kind="call") if e.result == "planned"}
    assert list(planned) == ["connector.stop", f"offsets.{action}", "connector.resume"]
    because = planned[f"offsets.{action}"].details["precondition"]
    assert f"effect on replication: {OFFSETS_EFFECTS['source']}" in because and SAID[action] in because
    assert all(SAID[action] not in e.details["precondition"] for a, e in planned.items() if a.startswith("connector."))
    plan = run.xcom("report")["text"]  # what the report task logs and returns: the dry-run plan
    line = next(ln for ln in plan.splitlines() if "/offsets" in ln and "[because:" in ln)
    assert line.lstrip().startswith("- DELETE" if action == "reset" else "- PATCH") and SAID[action] in line
    assert run.mutating_calls() == 0
    assert offsets_of(connect_b_url, name) == {0: 9, 1: 9} and state_of(connect_b_url, name) == "RUNNING"
