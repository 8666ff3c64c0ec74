"""What every runbook DAG shares: defaults, and parameter forms built from the topology.

The flow parameter offers the topology's flows as proposals (`examples`) rather than a strict
`enum`: an unknown flow then reaches the first task, which names the flows that do exist, instead
of being refused by the form with a generic schema error. Fixed choices use `enum`.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import Param

from mirrorbook.topology import Topology, TopologyError, default_path, load_topology

log = logging.getLogger(__name__)


def topology_or_none() -> Topology | None:
    try:
        return load_topology()
    except TopologyError as exc:
        log.warning("runbook forms built without a topology: %s", exc)
        return None


def runbook_dag_kwargs(dag_id: str, doc_md: str | None, params: dict[str, Param], **extra: Any) -> dict[str, Any]:
    return {
        "dag_id": dag_id,
        "doc_md": doc_md,
        "params": params,
        "schedule": None,
        "start_date": pendulum.datetime(2024, 1, 1, tz="UTC"),
        "catchup": False,
        "max_active_runs": 1,  # one run per DAG; the per-flow lock also stops other runbooks on the same flow
        "render_template_as_native_obj": True,
        "tags": ["mirrorbook", "runbook", "kafka", "mm2"],
        "default_args": {"retries": 1, "retry_delay": timedelta(seconds=5), "owner": "mirrorbook"},
        **extra,
    }


def flow_param(topology: Topology | None, description: str = "The replication flow, SOURCE->TARGET") -> Param:
    flows = topology.flow_names() if topology else []
    where = f" (flows in {default_path()}: {', '.join(flows) or 'none found'})"
    return Param(flows[0] if flows else "A->B", type="string", title="Flow", examples=flows or None,
                 description=description + where)


def choice_param(default: str, choices: tuple[str, ...] | list[str], title: str, description: str,
                 labels: dict[str, str] | None = None) -> Param:
    kw: dict[str, Any] = {"values_display": labels} if labels else {}
    return Param(default, type="string", enum=list(choices), title=title, description=description, **kw)


def parity_param() -> Param:
    return Param("spark", type="string", enum=["spark", "off"], title="Parity check",
                 description="spark: after each change, a Spark job proves offsets (and records) are where they must "
                             "be (master from the spark_default connection); off: only the step's own read-back")


def dry_run_param() -> Param:
    return Param(False, type="boolean", title="Dry run",
                 description="Only print the plan (every API call, with the precondition it checked); change nothing")


def move_params(topology: Topology | None, direction: str) -> dict[str, Param]:
    """The form failover and failback share; each adds what moving the other way needs."""
    from mirrorbook.runbooks.params import FAILOVER_MODES, TRANSLATIONS

    back = direction == "failback"
    return {
        "flow": flow_param(topology, "The flow that was failed over, SOURCE->TARGET: groups move back to SOURCE"
                           if back else "The flow to fail over, SOURCE->TARGET: groups move from SOURCE to TARGET"),
        "mode": choice_param("planned", FAILOVER_MODES, "Mode",
                             "planned: the cluster being left is up — stop consumers, drain, then switch; unplanned: "
                             "it is gone — switch from the other cluster alone, using MM2's last checkpoints"),
        "groups": Param(None, type=["null", "string"], title="Consumer groups (regex)",
                        description="whole-id regex of the groups to move; empty: the topology's managed groups"),
        "translation": choice_param("precise", TRANSLATIONS, "Offset translation",
                                    "precise: the exact next record, proven by content (planned only); "
                                    "mm2: MM2's checkpoints"),
        "drain_timeout": Param(600, type="integer", minimum=0, title="Drain timeout (s)",
                               description="how long a planned move waits for inactive groups and drained replication"),
        "max_lag": Param(0, type="integer", minimum=0, title="Max lag (records)",
                         description="replication counts as drained when every partition is within this many records"),
        **({"restart_flow": Param(True, type="boolean", title="Restart the original flow",
                                  description="resume SOURCE->TARGET once the groups are back on SOURCE")} if back else
           {"start_reverse_flow": Param(False, type="boolean", title="Start the reverse flow",
                                        description="start TARGET->SOURCE afterwards, ready for a later failback")}),
        "parity": parity_param(),
        "dry_run": dry_run_param(),
    }


def runbook_chain(params_model: str, steps: list[Any], *, report: Any = None, with_reverse: bool = False) -> None:
    """validate the form -> lock the flow -> steps... -> unlock (a teardown: runs whatever happened) -> report.

    Called inside the DAG's `with` block with the runbook's own steps already built."""
    from airflow.sdk import chain

    from mirrorbook.airflow.operators.runbook import FlowLockOperator, RunbookReportOperator, ValidateParamsOperator

    validate = ValidateParamsOperator(task_id="validate_params", params_model=params_model)
    lock = FlowLockOperator(task_id="lock_flow", dry_run="{{ params.dry_run }}", with_reverse=with_reverse)
    unlock = FlowLockOperator(task_id="unlock_flow", release=True, with_reverse=with_reverse).as_teardown(setups=lock)
    report = report or RunbookReportOperator(task_id="report", trigger_rule="all_done")
    chain(validate, lock, *steps, unlock, report)


def move_tasks(direction: str) -> None:
    """The task graph of mm2_failover / mm2_failback (called inside the DAG's `with` block)."""
    from mirrorbook.airflow.operators.move import GroupMoveOperator
    from mirrorbook.airflow.operators.parity import ParitySparkSubmitOperator
    from mirrorbook.airflow.sensors.kafka import GroupsInactiveSensor, ReplicationDrainedSensor

    def step(name: str, **kw: Any) -> GroupMoveOperator:
        return GroupMoveOperator(task_id=name, direction=direction, step=name, **kw)

    runbook_chain(direction, [
        step("precheck"),
        GroupsInactiveSensor(task_id="wait_groups_inactive", direction=direction),
        ReplicationDrainedSensor(task_id="wait_replication_drained", direction=direction),
        step("translate"),
        step("write_offsets"),
        [  # independent proofs, side by side: the cutover waits for the slower, not for both in turn
            ParitySparkSubmitOperator(task_id="group_parity", check="move", direction=direction),
            ParitySparkSubmitOperator(task_id="record_parity", check="move", app="record_parity",
                                      direction=direction, mode="{{ params.mode }}"),
        ],
        step("verify"),
        step("stop_flow"),
        step("start_other_flow"),
    ], report=step("report", trigger_rule="all_done"), with_reverse=True)
