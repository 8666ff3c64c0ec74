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
3. **resume_on_b** — the same groups consume on the target from the written offsets; every record is
   accounted for by its sequence number: **records re-read**, **records skipped (must be 0)**.
4. **restore** (always runs) — with `restore_after` the flow is started again, with `cleanup` the
   drill's groups are deleted on both clusters; otherwise the flow stays stopped and the report says so.
5. **report** (always runs) — **RTO** (cutover → consumers reading on the target), records re-read and
   skipped, lag before the cutover, time per step; an HTML report with charts (lag timeline from the
   metrics history, offsets before/after per group, step timeline) and a JSON summary in the artifacts
   directory, listed in the audit (`mirrorbook drill list`, `mirrorbook drill report RUN_ID --out FILE`).
   The task fails when the drill did not pass.
"""

from airflow.sdk import DAG, Param

from mirrorbook.airflow.dags import choice_param, flow_param, runbook_dag_kwargs, topology_or_none
from mirrorbook.airflow.operators.drill import DrillOperator
from mirrorbook.airflow.operators.runbook import FlowLockOperator
from mirrorbook.runbooks.drill import DrillParams
from mirrorbook.runbooks.params import TRANSLATIONS

d = DrillParams.model_construct()  # the defaults, for the form
params = {
    "flow": flow_param(topology_or_none(), "The flow to drill, SOURCE->TARGET: the canary groups move to TARGET"),
    "translation": choice_param(d.translation, TRANSLATIONS, "Offset translation",
                                "precise: exact next record, proven by content; mm2: MM2's checkpoints"),
    "topics": Param(d.topics, type="integer", minimum=1, maximum=20, title="Canary topics"),
    "partitions": Param(d.partitions, type="integer", minimum=1, maximum=64, title="Partitions per canary topic"),
    "groups": Param(d.groups, type="integer", minimum=1, maximum=20, title="Canary consumer groups"),
    "rate": Param(d.rate, type="number", exclusiveMinimum=0, title="Records per second"),
    "produce_s": Param(d.produce_s, type="number", minimum=1, title="Produce for (s)"),
    "steady_max_lag": Param(None, type=["null", "integer"], minimum=0, title="Steady when at most (records) behind",
                            description="canary records on the source not yet on the target; empty: 1 s of production"),
    "steady_timeout_s": Param(d.steady_timeout_s, type="number", exclusiveMinimum=0, title="Steady timeout (s)"),
    "drain_timeout": Param(d.drain_timeout, type="integer", minimum=0, title="Drain timeout (s)"),
    "max_lag": Param(d.max_lag, type="integer", minimum=0, title="Max lag when drained (records)"),
    "resume_timeout_s": Param(d.resume_timeout_s, type="number", exclusiveMinimum=0, title="Resume timeout (s)"),
    "sample_interval_s": Param(d.sample_interval_s, type="number", exclusiveMinimum=0, title="Lag sample interval (s)"),
    "restore_after": Param(d.restore_after, type="boolean", title="Restore the flow afterwards",
                           description="start the flow again once the drill is over"),
    "cleanup": Param(d.cleanup, type="boolean", title="Delete the drill's groups afterwards"),
    "topic_prefix": Param(d.topic_prefix, type="string", title="Canary topic prefix",
                          description="must be replicated by the flow"),
}

with DAG(**runbook_dag_kwargs("dr_drill", __doc__, params, tags=["mirrorbook", "drill", "kafka", "mm2"],
                              default_args={"retries": 0, "owner": "mirrorbook"})):
    validate = DrillOperator(task_id="validate_params", step="validate")
    lock = FlowLockOperator(task_id="lock_flow")
    steps = [DrillOperator(task_id=s, step=s) for s in ("canary", "precheck", "wait_drained", "translate",
                                                         "write_offsets", "verify", "stop_flow", "resume_on_b")]
    restore = DrillOperator(task_id="restore", step="restore", trigger_rule="all_done")
    unlock = FlowLockOperator(task_id="unlock_flow", release=True).as_teardown(setups=lock)
    report = DrillOperator(task_id="report", step="report", trigger_rule="all_done")
    chain = validate >> lock
    for s in steps:
        chain = chain >> s
    chain >> restore >> unlock >> report
