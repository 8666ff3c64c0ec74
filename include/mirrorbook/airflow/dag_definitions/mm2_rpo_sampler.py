"""
### mm2_rpo_sampler — a sample of every flow's source, seconds old when the source is lost

The unplanned failover states the RPO as a lower bound: the records the source held that MM2 had not replicated,
from the newest sample of the source's end offsets. The health check takes one on its schedule (minutes); this
DAG keeps one **seconds old**: each run polls for `period_s` (default 330 s: its 5-minute schedule and a little
more, so runs overlap), every `poll_s` (default 1 s) —

* one ListOffsets per source cluster (the end offsets of the partitions its flows replicate),
* the MirrorSourceConnector's offsets from Connect (what MM2 has replicated), per flow,
* records counted only on partitions that have shown transaction markers or aborted records (their offsets are
  not their records); every other partition is taken by offsets.

Only the newest sample per flow is kept in the audit store (one row per flow, replaced each poll), with the
produce rate between polls and, once a poll cannot reach the source, since when. `mm2_failover` (unplanned)
states its lower bound from it, with the sample's age, and beside it an estimate from that rate.

The sampling waits in Airflow's **triggerer** (a deferred task holds no worker slot). Schedule: set
`MIRRORBOOK_RPO_SAMPLER_SCHEDULE` to a cron expression or preset (`none`: manual runs only), with `period_s` a
little longer than its period.
"""

from datetime import timedelta

import pendulum
from airflow.sdk import DAG

from mirrorbook import settings
from mirrorbook.airflow.forms import form
from mirrorbook.airflow.operators.rpo import RpoSamplerOperator
from mirrorbook.runbooks.rpo_sampler import MAX_PERIOD_S, SamplerParams

def build() -> DAG:
    with DAG(
        dag_id="mm2_rpo_sampler",
        doc_md=__doc__,
        schedule=settings.schedule(settings.RPO_SAMPLER_SCHEDULE),
        start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=2,  # each run outlasts its period a little: the next has started before it ends
        dagrun_timeout=timedelta(seconds=MAX_PERIOD_S + 300),
        # Sampling starts when mirrorbook is installed, as the health check's watching does: it only reads, and
        # the RPO bound of an unplanned failover is only as fresh as its newest sample.
        is_paused_upon_creation=False,
        tags=["mirrorbook", "rpo", "kafka", "mm2"],
        default_args={"owner": "mirrorbook", "retries": 1, "retry_delay": timedelta(seconds=10)},
        params=form(SamplerParams, None),
    ) as dag:
        RpoSamplerOperator(task_id="sample")
    return dag
