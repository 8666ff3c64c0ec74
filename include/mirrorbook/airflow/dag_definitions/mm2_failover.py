"""
### mm2_failover — move a flow's consumer groups from its source cluster to its target

For flow **A->B**: the managed consumer groups (`groups` regex; default from the topology) stop
reading on A and continue on B, from offsets that skip nothing and re-read as little as possible.
Tick **Dry run** first: the plan — every call, with the precondition it checked — and nothing changed.

**prepare** — `precheck`: flow state, reachability of both clusters (unplanned: only B is required),
the groups and their states, current lag; an *active* group on B stops the run here, by name.
Planned only: `wait_groups_inactive` and `wait_replication_drained` (deferring to the triggerer)
until the groups are inactive on A and replication has drained to within `max_lag`; they fail
clearly at `drain_timeout` seconds.

**translate** — `translate_offsets`: every group in one pass. `translation=auto` (the default) is
`precise` when planned — the exact next record, proven by content — and `mm2` (MM2's checkpoints)
when unplanned. A plan in which a group would skip records is refused unless `allow_skips`.

**write** — `write_offsets` on B (snapshot first; only groups EMPTY/absent there; only what
differs), then `read_back_offsets`: every planned offset must be committed on B.

**prove** — with `parity=spark`, two Spark jobs side by side under a real executor: every
group/partition committed on B where planned and never past the proven position; the records
identical on both sides and each group's next record on B the one it would have read on A (planned).

**switch** — `stop_flow`: stop the A->B connectors; `start_reverse_flow`: start B->A if asked.

**report** — per group/partition the offset written, records re-read and skipped (0), RTO (trigger
-> offsets written and flow stopped), and for unplanned the RPO.

Clearing any failed task and re-running converges to the same end state: the plan is kept in the
audit store's run progress, and offsets already in place are not written again.
"""

from airflow.sdk import DAG

from mirrorbook.airflow.dags import move_tasks, runbook_dag
from mirrorbook.runbooks.params import FailoverParams


def build() -> DAG:
    with runbook_dag("mm2_failover", FailoverParams, __doc__) as dag:
        move_tasks(FailoverParams, "failover")
    return dag
