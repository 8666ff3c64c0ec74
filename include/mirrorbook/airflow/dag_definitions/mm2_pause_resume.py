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

from mirrorbook.airflow.dags import runbook_chain, runbook_dag
from mirrorbook.airflow.operators.connectors import ConnectorStateOperator
from mirrorbook.airflow.operators.parity import CaptureGroupOffsetsOperator, ParitySparkSubmitOperator
from mirrorbook.airflow.sensors.connect import ConnectorStateSensor
from mirrorbook.runbooks.params import PauseResumeParams as P


def build() -> DAG:
    with runbook_dag("mm2_pause_resume", P, __doc__) as dag:
        runbook_chain(P, [
            CaptureGroupOffsetsOperator(task_id="capture_group_offsets", params_model=P),
            ConnectorStateOperator(task_id="apply", params_model=P),
            ConnectorStateSensor(task_id="wait_for_state", params_model=P),
            ParitySparkSubmitOperator(task_id="group_parity", check="unchanged", params_model=P),
        ])
    return dag
