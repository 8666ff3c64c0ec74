"""Every task of every DAG has an execution_timeout, derived from the task's own deadline — so no runaway task
holds a flow lock — and each covers the waits its task makes. The DAGs are parsed from dags/ as Airflow's
DAG processor parses them (no topology needed: the forms then carry no flow choices)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.airflow


@pytest.fixture(scope="module")
def tasks() -> list[Any]:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert not bag.import_errors, bag.import_errors
    assert len(bag.dags) >= 6
    return [t for dag in bag.dags.values() for t in dag.tasks]


def test_every_task_has_an_execution_timeout_derived_from_its_own_deadline(tasks):
    from mirrorbook.airflow.operators.base import RunbookTask

    assert tasks
    for task in tasks:
        where = f"{task.dag_id}.{task.task_id}"
        # A mapped task is built per instance at run time: its class's deadline, given to partial() as is.
        cls = getattr(task, "operator_class", type(task))
        assert issubclass(cls, RunbookTask), f"{where} is not a RunbookTask: it has no deadline of its own"
        assert task.execution_timeout is not None, where
        # Nothing overrides the derived value (a DAG file passing execution_timeout=… would show here).
        derived = (task.task_deadline_s({"timeout": getattr(task, "timeout", None)}) if isinstance(task, RunbookTask)
                   else cls.deadline_s)
        assert task.execution_timeout == timedelta(seconds=derived), where
        assert timedelta(seconds=30) <= task.execution_timeout <= timedelta(days=2), (where, task.execution_timeout)


def test_each_timeout_covers_the_waits_of_its_task(tasks):
    from mirrorbook.airflow.operators.move import GroupMoveOperator
    from mirrorbook.runbooks.move_steps import STEPS
    from mirrorbook.airflow.sensors.connect import ConnectorStateSensor
    from mirrorbook.airflow.sensors.kafka import TRIGGER_MARGIN_S, _MoveGateSensor

    kinds = set()
    for task in tasks:
        where = f"{task.dag_id}.{task.task_id}"
        if isinstance(task, _MoveGateSensor):
            # The longest drain_timeout the runbook's model accepts, its deferral's margin, and one poke.
            longest = next(m.le for m in task.params_model.model_fields["drain_timeout"].metadata
                           if getattr(m, "le", None) is not None)
            assert task.execution_timeout == timedelta(seconds=longest + 2 * TRIGGER_MARGIN_S), where
        elif isinstance(task, ConnectorStateSensor):
            assert task.execution_timeout > timedelta(seconds=task.timeout), where  # its whole wait, and more
        elif isinstance(task, GroupMoveOperator):
            assert task.execution_timeout == timedelta(seconds=STEPS[task.step][1]), where
        else:
            continue
        kinds.add(type(task).__name__)
    assert kinds >= {"GroupsInactiveSensor", "ReplicationDrainedSensor", "ConnectorStateSensor", "GroupMoveOperator"}


def test_the_move_gates_timeout_follows_the_models_bound():
    """Derived, not fixed: a model that accepts shorter waits gives its gates a shorter timeout."""
    from pydantic import Field

    from mirrorbook.airflow.sensors.kafka import TRIGGER_MARGIN_S, GroupsInactiveSensor
    from mirrorbook.runbooks.params import MAX_WAIT_S, FailoverParams

    class ShortWaits(FailoverParams):
        drain_timeout: int = Field(60, ge=0, le=120)

    short = GroupsInactiveSensor(task_id="short", params_model=ShortWaits)
    assert short.execution_timeout == timedelta(seconds=120 + 2 * TRIGGER_MARGIN_S)
    default = GroupsInactiveSensor(task_id="default", params_model=FailoverParams)
    assert default.execution_timeout == timedelta(seconds=MAX_WAIT_S + 2 * TRIGGER_MARGIN_S)
