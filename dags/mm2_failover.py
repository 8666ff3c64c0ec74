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

from airflow.sdk import DAG

from mirrorbook.airflow.dags import move_params, move_tasks, runbook_dag_kwargs, topology_or_none

with DAG(**runbook_dag_kwargs("mm2_failover", __doc__, move_params(topology_or_none(), "failover"))):
    move_tasks("failover")
