"""Every runbook DAG's form is its model's: same fields in the same order, same types, choices, bounds,
titles, descriptions and defaults — generated, so the UI and the validation cannot drift."""

from __future__ import annotations

import pytest

from mirrorbook.airflow.forms import form
from mirrorbook.runbooks.drill import DrillParams
from mirrorbook.runbooks.health import HealthParams
from mirrorbook.runbooks.params import RUNBOOKS, ChangeParams, parse

pytestmark = pytest.mark.airflow
MODELS = {**RUNBOOKS, "dr_drill": DrillParams, "mm2_health_check": HealthParams}


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
