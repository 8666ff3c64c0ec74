"""FlowEventsOperator: the health check's flow state changes, as Airflow Asset events.

Each flow whose state changed since the previous check gets an event on its Asset
`mirrorbook://flows/<source>/<target>` (runbooks/health/events.py says how changes are found), with the old
and new state, the lag and the check's run id in its extra, so users schedule their own DAGs on a flow's
changes (`schedule=Asset("mirrorbook://flows/A/B")`) — mm2_failover_on_alert is one. The Assets a topology
will have are not known when this DAG is parsed, so the events go out through one AssetAlias
(`FLOW_CHANGES`), which Airflow resolves to each flow's Asset.

It runs after check_flows whatever that found (a check that fails — a flow NOT_REPLICATING — is exactly
when its change matters, and a failed task emits no Asset event of its own), as a teardown: it never
decides the health check run's outcome, which stays check_flows'.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import Asset, AssetAlias

from mirrorbook.airflow.operators.base import MirrorbookBaseOperator, guarded
from mirrorbook.airflow.operators.health import HEALTH_XCOM_KEY
from mirrorbook.errors import Refused
from mirrorbook.runbooks.health import HealthParams
from mirrorbook.runbooks.health.events import remember

FLOW_CHANGES = AssetAlias("mirrorbook-flow-state-changes")


class FlowEventsOperator(MirrorbookBaseOperator[HealthParams]):
    ui_color = "#f1e8fb"
    deadline_s = 120.0

    def __init__(self, *, check_task_id: str = "check_flows", **kwargs: Any) -> None:
        super().__init__(params_model=HealthParams, outlets=[FLOW_CHANGES], **kwargs)
        self.check_task_id = check_task_id

    def execute(self, context: Any) -> list[dict[str, Any]]:
        found = context["ti"].xcom_pull(task_ids=self.check_task_id, key=HEALTH_XCOM_KEY)
        if not found or not found.get("flows"):
            self.log.warning("%s left no findings: no flow state to compare", self.check_task_id)
            return []
        rb = self.runbook(context, dry_run=False)
        topology = self.hook.topology
        ends = {}
        for f in found["flows"]:
            try:
                spec = topology.flow(f["flow"])
                ends[f["flow"]] = (spec.source, spec.target)
            except Refused:  # gone from the topology since the check read it: its name still says both ends
                source, _, target = str(f["flow"]).partition("->")
                ends[f["flow"]] = (source, target)
        changes = guarded(lambda: remember(rb, found["flows"], datetime.fromisoformat(found["observed_at"]), ends))
        for c in changes:
            self.log.info("%s: %s -> %s (%s)", c.flow, c.old_state, c.new_state, c.uri)
            context["outlet_events"][FLOW_CHANGES].add(Asset(name=c.uri, uri=c.uri), extra=c.extra())
        if not changes:
            self.log.info("no flow changed state")
        return [c.extra() for c in changes]
