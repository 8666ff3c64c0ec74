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

from airflow.sdk import DAG

from mirrorbook.airflow.dags import move_tasks, runbook_dag
from mirrorbook.runbooks.params import FailbackParams


def build() -> DAG:
    with runbook_dag("mm2_failback", FailbackParams, __doc__) as dag:
        move_tasks(FailbackParams, "failback")
    return dag
