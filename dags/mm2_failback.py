"""
### mm2_failback — bring a failed-over flow's consumer groups back to its source cluster

`flow` is the flow that was failed over (e.g. **A->B**). Once A is back, its groups move from B
back to A, through the reverse flow (B->A):

* offsets on the remote topics from A (`A.orders` on B) go back to the original topics (`orders`
  on A) — inverting the original flow's offset-syncs, proven by content in `precise` mode;
* offsets on topics written on B during the outage (`orders` on B) go through B->A (`B.orders` on
  A), like a failover of B->A.

The same gates as a failover apply (planned: groups inactive on B and B->A drained; only groups
EMPTY/absent on A are written; snapshot first; verify). Afterwards B->A is stopped and, if
`restart_flow`, A->B resumes. The report adds the **divergence**: per partition, the records that
reached A but never B before the outage — the consumers did not see them on B and will now read
them on A; decide what to replay.
"""

from airflow.sdk import DAG, Param

from mirrorbook.airflow.dags import (choice_param, dry_run_param, flow_param, parity_param, runbook_dag_kwargs,
                                     topology_or_none)
from mirrorbook.airflow.operators.move import GroupMoveOperator
from mirrorbook.airflow.operators.parity import ParitySparkSubmitOperator
from mirrorbook.airflow.operators.runbook import FlowLockOperator, ValidateParamsOperator
from mirrorbook.airflow.sensors.kafka import GroupsInactiveSensor, ReplicationDrainedSensor
from mirrorbook.runbooks.params import FAILOVER_MODES, TRANSLATIONS

topology = topology_or_none()
params = {
    "flow": flow_param(topology, "The flow that was failed over, SOURCE->TARGET: groups move back to SOURCE"),
    "mode": choice_param("planned", FAILOVER_MODES, "Mode",
                         "planned: B is up — stop consumers on B, drain B->A, then switch back"),
    "groups": Param(None, type=["null", "string"], title="Consumer groups (regex)",
                    description="whole-id regex of the groups to move back; empty: the topology's managed groups"),
    "translation": choice_param("precise", TRANSLATIONS, "Offset translation",
                                "precise: exact next record, proven by content; mm2: MM2's checkpoints / offset-syncs"),
    "drain_timeout": Param(600, type="integer", minimum=0, title="Drain timeout (s)"),
    "max_lag": Param(0, type="integer", minimum=0, title="Max lag (records)"),
    "restart_flow": Param(True, type="boolean", title="Restart the original flow",
                          description="resume SOURCE->TARGET once the groups are back on SOURCE"),
    "parity": parity_param(),
    "dry_run": dry_run_param(),
}

with DAG(**runbook_dag_kwargs("mm2_failback", __doc__, params)):
    validate = ValidateParamsOperator(task_id="validate_params", params_model="failback")
    lock = FlowLockOperator(task_id="lock_flow", dry_run="{{ params.dry_run }}", with_reverse=True)
    steps = {s: GroupMoveOperator(task_id=s, direction="failback", step=s)
             for s in ("precheck", "translate", "write_offsets", "verify", "stop_flow", "start_other_flow")}
    inactive = GroupsInactiveSensor(task_id="wait_groups_inactive", direction="failback")
    drained = ReplicationDrainedSensor(task_id="wait_replication_drained", direction="failback")
    group_parity = ParitySparkSubmitOperator(task_id="group_parity", check="move", direction="failback")
    record_parity = ParitySparkSubmitOperator(task_id="record_parity", check="move", app="record_parity",
                                              direction="failback", mode="{{ params.mode }}")
    unlock = FlowLockOperator(task_id="unlock_flow", release=True, with_reverse=True).as_teardown(setups=lock)
    report = GroupMoveOperator(task_id="report", direction="failback", step="report", trigger_rule="all_done")
    (validate >> lock >> steps["precheck"] >> inactive >> drained >> steps["translate"] >> steps["write_offsets"]
     >> group_parity >> record_parity >> steps["verify"] >> steps["stop_flow"] >> steps["start_other_flow"] >> unlock >> report)
