"""
### mm2_offsets — list, alter, reset or restore a MirrorMaker 2 connector's offsets

Strimzi proposal 083 semantics on one of the flow's connectors (source, checkpoint or heartbeat):

* **list** — reads the offsets, stores them in the audit trail (a snapshot you can restore later)
  and writes the artifact `<source>--<target>.<Connector>.json` to the artifacts directory
  (`MIRRORBOOK_ARTIFACTS_DIR`, default `$AIRFLOW_HOME/mirrorbook/artifacts`).
* **alter** — applies `offsets`, a KIP-875 body such as
  `{"offsets": [{"partition": {"cluster": "A", "topic": "orders", "partition": 0}, "offset": {"offset": 41}}]}`.
  The body is validated before anything is sent (keys, types, offset >= 0 or null; checkpoint and
  heartbeat offsets must be exactly 0).
* **reset** — deletes the connector's offsets. For the **source** connector that means MM2 re-copies
  every retained record of the flow's topics from the start on its next run: **duplicates on the
  target** (consumers there read them again). An **alter** to a lower offset re-copies too; to a
  higher one, the records in between are never copied. The form and the plan say so beside each call.
* **restore** — re-applies a snapshot (`snapshot_id`, e.g. the one taken before an alter) exactly.

Changes need a **STOPPED** connector. A running or paused one is refused — unless `stop_first`, in
which case the runbook snapshots the offsets, stops the connector, waits for STOPPED, changes the
offsets, reads them back, then puts the connector back in its previous state. Offsets already as
requested are not sent again. `dry_run` prints the plan and changes nothing. With `parity=spark`
a Spark job then judges the connector's offsets as read back (while STOPPED) against the request,
and proves that no consumer group of the flow moved on either cluster.
"""

from airflow.sdk import DAG

from mirrorbook.airflow.dags import approval_step, runbook_chain, runbook_dag
from mirrorbook.airflow.operators.offsets import ConnectorOffsetsOperator
from mirrorbook.airflow.operators.parity import CaptureGroupOffsetsOperator, ParitySparkSubmitOperator
from mirrorbook.runbooks.params import OffsetsParams as P


def build() -> DAG:
    with runbook_dag("mm2_offsets", P, __doc__) as dag:
        runbook_chain(P, [
            CaptureGroupOffsetsOperator(task_id="capture_group_offsets", params_model=P),
            approval_step(P),
            ConnectorOffsetsOperator(task_id="apply", params_model=P),
            ParitySparkSubmitOperator(task_id="group_parity", check="offsets", params_model=P),
        ])
    return dag
