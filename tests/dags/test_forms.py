"""Every runbook DAG's form is its model's: same fields in the same order, same types, choices, bounds,
titles, descriptions and defaults — generated, so the UI and the validation cannot drift. What the forms
say their choices do, and the failover and failback graphs as an operator reads them: five named groups
of named steps, in order. (The same, rendered by Airflow's UI in Chromium: tests/e2e/test_forms_ui.py.)"""

from __future__ import annotations

import pytest

from mirrorbook.airflow.forms import form
from mirrorbook.runbooks.alerts import OnAlertParams
from mirrorbook.runbooks.drill import DrillParams
from mirrorbook.runbooks.health import HealthParams
from mirrorbook.runbooks.params import OFFSETS_EFFECTS, ChangeParams, parse
from mirrorbook.runbooks.registry import RUNBOOKS
from mirrorbook.runbooks.rpo_sampler import SamplerParams

pytestmark = pytest.mark.airflow
MODELS = {dag_id: r.params for dag_id, r in RUNBOOKS.items()}
assert {MODELS[d] for d in ("dr_drill", "mm2_health_check", "mm2_failover_on_alert", "mm2_rpo_sampler")} == \
    {DrillParams, HealthParams, OnAlertParams, SamplerParams}


@pytest.mark.parametrize("dag_id", sorted(MODELS))
def test_the_dag_form_is_generated_from_the_model(dagbag, topology, dag_id):
    model = MODELS[dag_id]
    dag = dagbag.get_dag(dag_id)
    assert list(dag.params) == list(model.model_fields)
    expected = form(model, topology)
    for name in model.model_fields:
        got = dag.params.get_param(name)
        assert got.schema == expected[name].schema, name
        assert got.value == expected[name].value, name
        assert got.description == expected[name].description, name
        for bound, ours in (("minimum", "ge"), ("maximum", "le"), ("exclusiveMinimum", "gt"),
                            ("exclusiveMaximum", "lt")):
            for m in model.model_fields[name].metadata:  # the model's own bounds, e.g. le=3600
                if getattr(m, ours, None) is not None:
                    assert got.schema.get(bound) == getattr(m, ours), (name, bound)
    # The form's own defaults are a valid run.
    parse(model, dag.params.dump(), topology)
    if issubclass(model, ChangeParams):
        assert list(dag.params)[:2] == ["flow", "dry_run"]  # dry run right after the flow, above the fold


def test_the_forms_say_what_their_choices_do(dagbag):
    translation = dagbag.get_dag("mm2_failover").params.get_param("translation")
    assert translation.value == "auto"
    assert translation.description.startswith("auto: precise when planned, mm2 when unplanned;")
    action = dagbag.get_dag("mm2_offsets").params.get_param("action").description
    assert all(f"{role} — {effect}" in action for role, effect in OFFSETS_EFFECTS.items())
    # What an alter or a reset of the source connector's offsets does to the target, in so many words.
    assert "a LOWER offset re-copies records already on the target (duplicates there)" in action
    assert "a reset re-copies every retained record from the start (duplicates on the target)" in action


GROUPS = {"prepare": ["precheck", "wait_groups_inactive", "wait_replication_drained", "warm_proof"],
          "translate": ["translate_offsets"],
          "approve": ["approve_plan"],
          "write": ["write_offsets", "read_back_offsets"],
          "prove": ["group_parity", "record_parity"],
          "switch": ["stop_flow", "confirm_flow_stopped"]}
ALONE = ["validate_params", "lock_flow", "unlock_flow", "report"]
ORDER = ["validate_params", "lock_flow", *GROUPS, "unlock_flow", "report"]


@pytest.mark.parametrize("dag_id,last_step", [("mm2_failover", "start_reverse_flow"),
                                              ("mm2_failback", "restart_flow")])
def test_a_move_reads_as_six_groups_of_named_steps_in_order(dagbag, dag_id, last_step):
    dag = dagbag.get_dag(dag_id)
    groups = {gid: g for gid, g in dag.task_group.get_task_group_dict().items() if gid}
    expected = {**GROUPS, "switch": [*GROUPS["switch"], last_step]}
    assert {gid: list(g.children) for gid, g in groups.items()} == expected
    assert set(dag.task_group.children) == {*GROUPS, *ALONE}  # nothing else at the top
    # Task ids carry no group prefix: the REST API, mark_success patterns and the docs name them as is.
    assert sorted(dag.task_ids) == sorted([*ALONE, *(t for ids in expected.values() for t in ids)])
    for before, after in zip(ORDER, ORDER[1:]):  # each group starts once the whole previous one is done
        leaves = [t.task_id for t in groups[before].get_leaves()] if before in groups else [before]
        roots = [t.task_id for t in groups[after].get_roots()] if after in groups else [after]
        for root in roots:
            assert set(leaves) <= dag.get_task(root).upstream_task_ids, (dag_id, before, after, root)
