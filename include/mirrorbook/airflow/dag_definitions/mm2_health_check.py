"""
### mm2_health_check — is every MirrorMaker 2 flow replicating, and how fresh is it?

Scheduled (default every 5 minutes; set `MIRRORBOOK_HEALTH_SCHEDULE` to a cron expression or preset,
or `none` for manual runs only). For every flow of the topology (or those matching `flows`):

* the **KIP-1144 state** (REPLICATING / CONCERNING / NOT_REPLICATING / DISABLED — or UNKNOWN when the
  connectors could not be read: Connect did not answer or refused mirrorbook, said first) and each connector's
  and task's state — with `restart_failed`, FAILED connectors and FAILED tasks of running connectors are
  restarted through the runbook engine (audited, under the flow's lock; paused or stopped connectors are
  never touched), then looked at again;
* **replication lag** per partition (source high watermark vs the source connector's offsets);
* **heartbeat age** — now minus the newest SOURCE->TARGET heartbeat on the target's heartbeats topics;
* **checkpoint age** per managed group — now minus its newest checkpoint; a group fails the check only when
  its committed offsets moved past that checkpoint and no newer one came for `max_checkpoint_age_s`
  (MM2 emits checkpoints only when offsets change: an idle group is not a fault);
* **replication hops** from the source, by the target's heartbeat topics;
* **lost records**: `DATA_LOSS` when the source connector's next offset is below a source partition's log
  start (retention or delete-records took records MM2 had not read), `TARGET_RESET` when a mirrored topic on
  the target was truncated, re-created or deleted since the previous check — each fails the check, and the
  records lost so far are kept per partition (`mirrorbook_flow_records_lost_total` at `/mirrorbook/metrics`).

Connect and the clusters are asked concurrently; MM2's topics are read once per target cluster.
Each run stores one metrics sample per flow in the audit store (the unplanned failover's RPO
estimate and the plugin's `/mirrorbook/metrics` read it). A crossed threshold fails the run with a message naming the
flow and the figure,
and the alert notifier logs it and POSTs it to `MIRRORBOOK_ALERT_WEBHOOK_URL` when set.

**flow_events** — each flow whose state changed since the last check gets an Asset event on
`mirrorbook://flows/<source>/<target>` (extra: old and new state, lag, this run's id): schedule your own
DAGs on it. mm2_failover_on_alert is one.
"""

from datetime import timedelta

import pendulum
from airflow.sdk import DAG

from mirrorbook import settings
from mirrorbook.airflow.forms import form
from mirrorbook.airflow.notifiers import MirrorbookAlertNotifier
from mirrorbook.airflow.operators.flow_events import FlowEventsOperator
from mirrorbook.airflow.operators.health import HEALTH_XCOM_KEY, HealthCheckOperator
from mirrorbook.runbooks.health import HealthParams

def build() -> DAG:
    with DAG(
        dag_id="mm2_health_check",
        doc_md=__doc__,
        schedule=settings.schedule(settings.HEALTH_SCHEDULE),
        start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        dagrun_timeout=timedelta(minutes=10),
        # Watching starts when mirrorbook is installed: the check only reads (unless a run asks it to restart
        # FAILED tasks), and a DR estate nobody watches because a DAG was left paused is the failure it exists for.
        is_paused_upon_creation=False,
        tags=["mirrorbook", "health", "kafka", "mm2"],
        default_args={"owner": "mirrorbook", "retries": 0},
        params=form(HealthParams, None),
    ) as dag:
        check = HealthCheckOperator(task_id="check_flows",
                                    on_failure_callback=[MirrorbookAlertNotifier(details_key=HEALTH_XCOM_KEY)])
        # Whatever the check found, a teardown: it announces state changes, never decides the run's outcome.
        check >> FlowEventsOperator(task_id="flow_events").as_teardown()
    return dag
