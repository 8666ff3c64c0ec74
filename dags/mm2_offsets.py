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
* **reset** — deletes the connector's offsets (the source connector then re-reads from the start).
* **restore** — re-applies a snapshot (`snapshot_id`, e.g. the one taken before an alter) exactly.

Changes need a **STOPPED** connector. A running or paused one is refused — unless `stop_first`, in
which case the runbook snapshots the offsets, stops the connector, waits for STOPPED, changes the
offsets, reads them back, then puts the connector back in its previous state. Offsets already as
requested are not sent again. `dry_run` prints the plan and changes nothing. With `parity=spark`
a Spark job then judges the connector's offsets as read back (while STOPPED) against the request,
and proves that no consumer group of the flow moved on either cluster.
"""

from airflow.sdk import DAG, Param

from mirrorbook.airflow.dags import (choice_param, dry_run_param, flow_param, parity_param, runbook_chain,
                                     runbook_dag_kwargs, topology_or_none)
from mirrorbook.airflow.operators.offsets import ConnectorOffsetsOperator
from mirrorbook.airflow.operators.parity import CaptureGroupOffsetsOperator, ParitySparkSubmitOperator
from mirrorbook.runbooks.params import OFFSETS_ACTIONS

DRY = "{{ params.dry_run }}"
params = {
    "flow": flow_param(topology_or_none()),
    "connector": choice_param("source", ("source", "checkpoint", "heartbeat"), "Connector",
                              "which of the flow's MM2 connectors",
                              {"source": "MirrorSourceConnector", "checkpoint": "MirrorCheckpointConnector",
                               "heartbeat": "MirrorHeartbeatConnector"}),
    "action": choice_param("list", OFFSETS_ACTIONS, "Action", "list | alter | reset | restore"),
    "offsets": Param(None, type=["null", "object", "string"], title="Offsets (alter)",
                     description='KIP-875 body for alter: {"offsets": [{"partition": {...}, "offset": {"offset": N}}]}'),
    "stop_first": Param(False, type="boolean", title="Stop first",
                        description="stop the connector for the change, then restore its previous state"),
    "snapshot_id": Param(None, type=["null", "string"], title="Snapshot id (restore)",
                         description="snapshot to re-apply, from `mirrorbook audit snapshots`"),
    "parity": parity_param(),
    "dry_run": dry_run_param(),
}

with DAG(**runbook_dag_kwargs("mm2_offsets", __doc__, params)):
    runbook_chain("offsets", [
        CaptureGroupOffsetsOperator(task_id="capture_group_offsets", dry_run=DRY),
        ConnectorOffsetsOperator(task_id="apply", dry_run=DRY),
        ParitySparkSubmitOperator(task_id="group_parity", check="offsets", action="{{ params.action }}"),
    ])
