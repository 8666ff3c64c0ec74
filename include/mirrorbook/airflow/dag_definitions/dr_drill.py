"""
### dr_drill — a DR drill of one flow, with a report for the auditors

A real planned switchover of the flow, measured with a canary workload of its own:

1. **canary** — topics `<topic_prefix>-t<i>` on the source (created once, reused by later drills) and
   this run's consumer groups. A producer writes sequence-numbered keyed records at `rate`/s for
   `produce_s`; the groups consume and commit (group 0 keeps up, the others lag). When replication is
   steady, the producer stops, then the consumers: the **cutover**.
2. **precheck → wait_drained → translate → write_offsets → verify → stop_flow** — mm2_failover's own
   steps, for the canary groups only (`translation` precise or mm2). The whole flow is stopped, as in
   a real switchover.
3. **resume_on_target** — the same groups consume on the target from the written offsets; every record is
   accounted for by its sequence number: **records re-read**, **records skipped (must be 0)**.
4. **restore** (always runs) — with `restore_after` the flow is started again, with `cleanup` the
   drill's groups are deleted on both clusters; otherwise the flow stays stopped and the report says so.
5. **report** (always runs) — **RTO** (cutover → consumers reading on the target), records re-read and
   skipped, lag before the cutover, time per step; an HTML report with charts (lag timeline from the
   metrics history, offsets before/after per group, step timeline) and a JSON summary in the artifacts
   directory, listed in the audit (`mirrorbook drill list`, `mirrorbook drill report RUN_ID --out FILE`).
   The task fails when the drill did not pass.
"""

from airflow.sdk import DAG, chain

from mirrorbook.airflow.dags import runbook_dag
from mirrorbook.airflow.operators.drill import DrillOperator
from mirrorbook.airflow.operators.runbook import FlowLockOperator, ValidateParamsOperator
from mirrorbook.runbooks.drill import DrillParams as P

STEPS = ("canary", "precheck", "wait_drained", "translate", "write_offsets", "verify", "stop_flow", "resume_on_target")


def build() -> DAG:
    with runbook_dag("dr_drill", P, __doc__, tags=["mirrorbook", "drill", "kafka", "mm2"],
                     default_args={"retries": 0, "owner": "mirrorbook"}) as dag:
        lock = FlowLockOperator(task_id="lock_flow", params_model=P)
        steps = [DrillOperator(task_id=s, step=s) for s in STEPS]
        restore = DrillOperator(task_id="restore", step="restore", trigger_rule="all_done")
        unlock = FlowLockOperator(task_id="unlock_flow", params_model=P, release=True).as_teardown(setups=lock)
        chain(ValidateParamsOperator(task_id="validate_params", params_model=P), lock, *steps, restore, unlock,
              DrillOperator(task_id="report", step="report", trigger_rule="all_done"))
    return dag
