"""
### mm2_failover — move a flow's consumer groups from its source cluster to its target

For flow **A->B**: the managed consumer groups (`groups` regex; default from the topology) stop
reading on A and continue on B, from offsets that skip nothing and re-read as little as possible.

1. **precheck** — flow state, reachability of both clusters (unplanned: only B is required), the
   groups and their states, current lag. An *active* group on B stops the run here, by name.
2. **planned only**: wait (deferring to the triggerer) until the groups are inactive on A and
   replication has drained to within `max_lag`; fail clearly at `drain_timeout` seconds.
3. **translate** every group in one pass — `precise` (the exact next record, proven by content;
   MM2's checkpoint where not proven) or `mm2` (MM2's own checkpoints). Unplanned: checkpoints on B.
4. **write_offsets** on B — snapshot first; only groups EMPTY/absent there; only what differs.
5. **verify** — Spark parity jobs (`parity=spark`): every group/partition committed on B where
   planned and never past the proven position; records identical on both sides and each group's
   next record on B the one it would have read on A (planned). Then read the offsets back from B.
6. **stop_flow** — stop the A->B connectors; **start_other_flow** — start B->A if `start_reverse_flow`.
7. **report** — per group/partition the offset written, records re-read and skipped (0), RTO
   (trigger -> offsets written and flow stopped), and for unplanned the RPO estimate.

Clearing any failed task and re-running converges to the same end state: the plan is kept in the
audit store's run progress, and offsets already in place are not written again.
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
    "flow": flow_param(topology, "The flow to fail over, SOURCE->TARGET: groups move from SOURCE to TARGET"),
    "mode": choice_param("planned", FAILOVER_MODES, "Mode",
                         "planned: A is up — stop consumers, drain, then switch; unplanned: A is gone — switch "
                         "from B alone, using MM2's last checkpoints"),
    "groups": Param(None, type=["null", "string"], title="Consumer groups (regex)",
                    description="whole-id regex of the groups to move; empty: the topology's managed groups"),
    "translation": choice_param("precise", TRANSLATIONS, "Offset translation",
                                "precise: exact next record, proven by content (planned only); mm2: MM2's checkpoints"),
    "drain_timeout": Param(600, type="integer", minimum=0, title="Drain timeout (s)",
                           description="how long a planned failover waits for inactive groups and drained replication"),
    "max_lag": Param(0, type="integer", minimum=0, title="Max lag (records)",
                     description="replication counts as drained when every partition is within this many records"),
    "start_reverse_flow": Param(False, type="boolean", title="Start the reverse flow",
                                description="start TARGET->SOURCE afterwards, ready for a later failback"),
    "parity": parity_param(),
    "dry_run": dry_run_param(),
}

with DAG(**runbook_dag_kwargs("mm2_failover", __doc__, params)):
    validate = ValidateParamsOperator(task_id="validate_params", params_model="failover")
    lock = FlowLockOperator(task_id="lock_flow", dry_run="{{ params.dry_run }}", with_reverse=True)
    steps = {s: GroupMoveOperator(task_id=s, direction="failover", step=s)
             for s in ("precheck", "translate", "write_offsets", "verify", "stop_flow", "start_other_flow")}
    inactive = GroupsInactiveSensor(task_id="wait_groups_inactive", direction="failover")
    drained = ReplicationDrainedSensor(task_id="wait_replication_drained", direction="failover")
    group_parity = ParitySparkSubmitOperator(task_id="group_parity", check="move", direction="failover")
    record_parity = ParitySparkSubmitOperator(task_id="record_parity", check="move", app="record_parity",
                                              direction="failover", mode="{{ params.mode }}")
    unlock = FlowLockOperator(task_id="unlock_flow", release=True, with_reverse=True).as_teardown(setups=lock)
    report = GroupMoveOperator(task_id="report", direction="failover", step="report", trigger_rule="all_done")
    (validate >> lock >> steps["precheck"] >> inactive >> drained >> steps["translate"] >> steps["write_offsets"]
     >> group_parity >> record_parity >> steps["verify"] >> steps["stop_flow"] >> steps["start_other_flow"] >> unlock >> report)
