"""
### mm2_failover_on_alert — propose an unplanned failover of a flow that stays NOT_REPLICATING

Off unless the topology enables it (`failover_on_alert: {enabled: true}`); then scheduled on the
health check's Asset events of the flows it watches (`flows`, a regex; default all):

1. **wait_for_consecutive_checks** — for each flow whose change was to NOT_REPLICATING: waits (deferred)
   until `consecutive_checks` health checks in a row have found it so (default 3), or until it changes
   again (then nothing is proposed), at most `max_wait_s`.
2. **propose_failover** — per flow that stayed down: triggers **mm2_failover** with `mode=unplanned` and
   `approval=required` — always: a human approves it under Required Actions, seeing its plan and RPO
   estimate. Never twice: no proposal within `cooldown_s` (default 3600 s) of a failover or failback of the
   flow, a rejected failover of it, or an earlier proposal, nor while a runbook holds the flow — all read
   from the audit store. Each proposal, and each one held back, is an audit step.

A manual run may name a `flow`: its current NOT_REPLICATING episode is watched the same way.
"""

from airflow.sdk import DAG

from mirrorbook.airflow.dags import failover_on_alert_dag


def build() -> DAG:
    return failover_on_alert_dag(__doc__)
