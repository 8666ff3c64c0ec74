"""What every runbook DAG shares: defaults, the form generated from the runbook's model, the task chain.

DAG files stay a few lines: `runbook_dag(dag_id, Model, __doc__)` and the runbook's own steps.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import DAG, TaskGroup, chain

from mirrorbook.airflow.forms import form
from mirrorbook.redaction import get_logger
from mirrorbook.runbooks.params import FormParams, MoveParams
from mirrorbook.topology import Topology, TopologyError, load_topology

log = get_logger(__name__)


def topology_or_none() -> Topology | None:
    try:
        return load_topology()
    except TopologyError as exc:
        log.warning("runbook forms built without a topology: %s", exc)
        return None


class RunbookDAG(DAG):
    """A runbook's DAG. Its RTO deadlines are the scheduler's to evaluate, so `test()` — dag.test() and
    `airflow dags test` — runs it without them: a test run never evaluates deadlines, and Airflow 3.3.2's dag.test()
    fails every run that succeeds while the DAG carries any (it looks each up by an id its in-memory copy does not
    have: "'dict' object has no attribute 'hex'"). The DAG the scheduler serialises keeps them."""

    def test(self, *args: Any, **kwargs: Any) -> Any:
        deadline, self.deadline = self.deadline, None
        try:
            return super().test(*args, **kwargs)
        finally:
            self.deadline = deadline


def runbook_dag(dag_id: str, model: type[FormParams], doc_md: str | None, **extra: Any) -> DAG:
    """A runbook DAG whose form is `model`'s: use it as `with runbook_dag(...):`. A failover or failback has RTO
    deadlines (airflow/deadlines.py), from its flows' `rto_slo_s`."""
    from mirrorbook.airflow.deadlines import rto_deadlines

    topology = topology_or_none()
    kwargs: dict[str, Any] = {
        "dag_id": dag_id,
        "doc_md": doc_md,
        "params": form(model, topology),
        **({"deadline": rto_deadlines(topology)} if issubclass(model, MoveParams) else {}),
        "schedule": None,
        "start_date": pendulum.datetime(2024, 1, 1, tz="UTC"),
        "catchup": False,
        "max_active_runs": 1,  # one run per DAG; the per-flow lock also stops other runbooks on the same flow
        # Runbooks run only when triggered: a paused one would leave a failover triggered over the REST API queued.
        "is_paused_upon_creation": False,
        "tags": ["mirrorbook", "runbook", "kafka", "mm2"],
        "default_args": {"retries": 1, "retry_delay": timedelta(seconds=5), "owner": "mirrorbook"},
    }
    return RunbookDAG(**{**kwargs, **extra})


def approval_step(model: type[FormParams]) -> Any:
    """The approval of the run's plan (operators/approval.py), placed after the plan is known and before the
    first mutation. How long it waits is the topology's `approval.timeout_s` as this file was parsed."""
    from mirrorbook.airflow.operators.approval import ApprovePlanOperator
    from mirrorbook.topology import ApprovalPolicy

    topology = topology_or_none()
    policy = topology.approval if topology else ApprovalPolicy()
    return ApprovePlanOperator(task_id="approve_plan", params_model=model, timeout_s=policy.timeout_s)


def runbook_chain(model: type[FormParams], steps: list[Any], *, report: Any = None,
                  with_reverse: bool = False) -> None:
    """validate the form -> lock the flow -> steps... -> unlock (a teardown: runs whatever happened) -> report.

    Called inside the DAG's `with` block with the runbook's own steps already built."""
    from mirrorbook.airflow.operators.runbook import FlowLockOperator, RunbookReportOperator, ValidateParamsOperator

    validate = ValidateParamsOperator(task_id="validate_params", params_model=model)
    lock = FlowLockOperator(task_id="lock_flow", params_model=model, with_reverse=with_reverse)
    unlock = FlowLockOperator(task_id="unlock_flow", params_model=model, release=True).as_teardown(setups=lock)
    report = report or RunbookReportOperator(task_id="report", params_model=model, trigger_rule="all_done")
    chain(validate, lock, *steps, unlock, report)


def move_tasks(model: type[FormParams], direction: str) -> None:
    """The task graph of mm2_failover / mm2_failback (called inside the DAG's `with` block), in groups an
    operator reads at a glance: prepare -> translate -> write -> prove -> switch."""
    from mirrorbook.airflow.operators.move import GroupMoveOperator
    from mirrorbook.airflow.operators.parity import ParitySparkSubmitOperator, WarmProofOperator
    from mirrorbook.airflow.sensors.kafka import GroupsInactiveSensor, ReplicationDrainedSensor

    def step(task_id: str, name: str, **kw: Any) -> GroupMoveOperator:
        return GroupMoveOperator(task_id=task_id, step=name, params_model=model, **kw)

    # Task ids stay unprefixed (prefix_group_id=False): API users and `mirrorbook trigger` name them as is.
    with TaskGroup("prepare", prefix_group_id=False, tooltip="check the clusters and the flow, then wait for "
                   "the groups to stop and replication to drain (planned); warm the Spark Connect server "
                   "meanwhile") as prepare:
        chain(step("precheck", "precheck"),
              GroupsInactiveSensor(task_id="wait_groups_inactive", params_model=model),
              ReplicationDrainedSensor(task_id="wait_replication_drained", params_model=model))
        WarmProofOperator(task_id="warm_proof", params_model=model)  # beside the gates, off the critical path
    with TaskGroup("translate", prefix_group_id=False,
                   tooltip="where each group resumes on the new cluster: the plan, computed once") as translate:
        step("translate_offsets", "translate")
    with TaskGroup("approve", prefix_group_id=False, tooltip="a human approves the plan (Required Actions) "
                   "before anything changes, unless the run or the topology says approval=skip; dry runs never "
                   "wait") as approve:
        approval_step(model)
    with TaskGroup("write", prefix_group_id=False, tooltip="snapshot, write the planned offsets, read them "
                   "back") as write:
        chain(step("write_offsets", "write_offsets"), step("read_back_offsets", "verify"))
    with TaskGroup("prove", prefix_group_id=False, tooltip="Spark proofs, side by side under a real executor: "
                   "the cutover waits for the slower one, not both in turn") as prove:
        ParitySparkSubmitOperator(task_id="group_parity", check="move", params_model=model)
        ParitySparkSubmitOperator(task_id="record_parity", check="move", app="record_parity", params_model=model)
    other = "start_reverse_flow" if direction == "failover" else "restart_flow"
    with TaskGroup("switch", prefix_group_id=False, tooltip="stop the flow the groups left; start the other "
                   "direction if asked") as switch:
        chain(step("stop_flow", "stop_flow"), step("confirm_flow_stopped", "confirm_stopped"),
              step(other, "start_other_flow"))
    runbook_chain(model, [prepare, translate, approve, write, prove, switch],
                  report=step("report", "report", trigger_rule="all_done"), with_reverse=True)


def failover_on_alert_dag(doc_md: str | None) -> DAG:
    """mm2_failover_on_alert (runbooks/alerts.py): scheduled on the Assets of the flows the topology's
    `failover_on_alert` watches when it is enabled; otherwise never scheduled, and paused when first seen."""
    from airflow.sdk import Asset, AssetAny

    from mirrorbook.airflow.operators.alerts import ProposeFailoverOperator
    from mirrorbook.airflow.sensors.alerts import FlowsDownSensor
    from mirrorbook.runbooks.alerts import OnAlertParams
    from mirrorbook.runbooks.health.events import flow_uri

    topology = topology_or_none()
    uris = [flow_uri(f.source, f.target) for f in (topology.failover_on_alert.watched(topology) if topology else [])]
    dag = DAG(dag_id="mm2_failover_on_alert", doc_md=doc_md, params=form(OnAlertParams, topology),
              schedule=AssetAny(*(Asset(name=u, uri=u) for u in uris)) if uris else None,
              is_paused_upon_creation=not uris, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False,
              max_active_runs=4, tags=["mirrorbook", "alert", "kafka", "mm2"],
              default_args={"retries": 1, "retry_delay": timedelta(seconds=5), "owner": "mirrorbook"})
    with dag:
        down = FlowsDownSensor(task_id="wait_for_consecutive_checks", params_model=OnAlertParams)
        # One proposal per flow that stayed down (mapped: a failover run is triggered per task instance).
        ProposeFailoverOperator.partial(
            task_id="propose_failover", params_model=OnAlertParams,
            execution_timeout=timedelta(seconds=ProposeFailoverOperator.deadline_s)).expand(episode=down.output)
    return dag
