"""
### mm2_pause_resume — pause, resume or stop a MirrorMaker 2 flow

Moves the flow's connectors (all three, or one) to the state the **action** asks for and waits
until the Kafka Connect status shows it (`STOPPED` means the connector has no tasks).

* Every connector is read first; one that is already in the target state is left alone, so a
  re-run changes nothing.
* **stop** is what offsets changes require (KIP-875); **resume** brings a paused or stopped flow back.
* **parity** (`spark`): a Spark job then proves that no consumer group moved on either cluster.
* **dry_run** prints every call it would make, with the state it saw, and changes nothing.
* One runbook per flow at a time: a second run on the same flow is refused, naming the holder.

Every step and every call is in the audit trail: `mirrorbook audit list --run-id <run id>`.
"""

from airflow.sdk import DAG

from mirrorbook.airflow.dags import (choice_param, dry_run_param, flow_param, parity_param, runbook_chain,
                                     runbook_dag_kwargs, topology_or_none)
from mirrorbook.airflow.operators.connectors import ConnectorStateOperator
from mirrorbook.airflow.operators.parity import CaptureGroupOffsetsOperator, ParitySparkSubmitOperator
from mirrorbook.airflow.sensors.connect import ConnectorStateSensor
from mirrorbook.runbooks.params import CONNECTOR_SELECTIONS, PAUSE_RESUME_ACTIONS

DRY = "{{ params.dry_run }}"
params = {
    "flow": flow_param(topology_or_none()),
    "action": choice_param("pause", PAUSE_RESUME_ACTIONS, "Action",
                           "pause: tasks stay assigned, paused; resume: back to RUNNING; stop: no tasks at all "
                           "(required before offsets can be changed)"),
    "connectors": choice_param("all", CONNECTOR_SELECTIONS, "Connectors",
                               "all three of the flow's connectors, or only one of them"),
    "parity": parity_param(),
    "dry_run": dry_run_param(),
}

with DAG(**runbook_dag_kwargs("mm2_pause_resume", __doc__, params)):
    runbook_chain("pause_resume", [
        CaptureGroupOffsetsOperator(task_id="capture_group_offsets", dry_run=DRY),
        ConnectorStateOperator(task_id="apply", dry_run=DRY),
        ConnectorStateSensor(task_id="wait_for_state", dry_run=DRY),
        ParitySparkSubmitOperator(task_id="group_parity", check="unchanged"),
    ])
