"""What every runbook DAG shares: defaults, and parameter forms built from the topology.

The flow parameter offers the topology's flows as proposals (`examples`) rather than a strict
`enum`: an unknown flow then reaches the first task, which names the flows that do exist, instead
of being refused by the form with a generic schema error. Fixed choices use `enum`.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import Param

from mirrorbook.topology import Topology, TopologyError, default_path, load_topology

log = logging.getLogger(__name__)


def topology_or_none() -> Topology | None:
    try:
        return load_topology()
    except TopologyError as exc:
        log.warning("runbook forms built without a topology: %s", exc)
        return None


def runbook_dag_kwargs(dag_id: str, doc_md: str | None, params: dict[str, Param], **extra: Any) -> dict[str, Any]:
    return {
        "dag_id": dag_id,
        "doc_md": doc_md,
        "params": params,
        "schedule": None,
        "start_date": pendulum.datetime(2024, 1, 1, tz="UTC"),
        "catchup": False,
        "max_active_runs": 1,  # one run per DAG; the per-flow lock also stops other runbooks on the same flow
        "render_template_as_native_obj": True,
        "tags": ["mirrorbook", "runbook", "kafka", "mm2"],
        "default_args": {"retries": 1, "retry_delay": timedelta(seconds=5), "owner": "mirrorbook"},
        **extra,
    }


def flow_param(topology: Topology | None, description: str = "The replication flow, SOURCE->TARGET") -> Param:
    flows = topology.flow_names() if topology else []
    where = f" (flows in {default_path()}: {', '.join(flows) or 'none found'})"
    return Param(flows[0] if flows else "A->B", type="string", title="Flow", examples=flows or None,
                 description=description + where)


def choice_param(default: str, choices: tuple[str, ...] | list[str], title: str, description: str,
                 labels: dict[str, str] | None = None) -> Param:
    kw: dict[str, Any] = {"values_display": labels} if labels else {}
    return Param(default, type="string", enum=list(choices), title=title, description=description, **kw)


def parity_param() -> Param:
    return Param("spark", type="string", enum=["spark", "off"], title="Parity check",
                 description="spark: after each change, a Spark job proves offsets (and records) are where they must "
                             "be (master from the spark_default connection); off: only the step's own read-back")


def dry_run_param() -> Param:
    return Param(False, type="boolean", title="Dry run",
                 description="Only print the plan (every API call, with the precondition it checked); change nothing")
