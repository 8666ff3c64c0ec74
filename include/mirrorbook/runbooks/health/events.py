"""Flow state changes, as the health check announces them (Airflow Asset events, `mirrorbook://flows/S/T`).

The health check remembers each flow's state between runs — in the audit store's run progress, under
`MEMORY_RUN`, one entry per flow: the state, since which check, and how many checks in a row have found it —
and each run compares what it found with that memory: a flow whose state differs is a change (announced
once), a flow in the same state adds one check to its count (what mm2_failover_on_alert waits on). The
memory is the health check's own, not its metrics samples: a run whose announcement failed is retried
with the same changes, and a restart of the check never counts one run twice.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel

from mirrorbook.audit import AuditStore
from mirrorbook.core.engine import Runbook

MEMORY_RUN = "mirrorbook.flow-states"  # the run-progress "run" holding the memory (a key per flow)


def flow_uri(source: str, target: str) -> str:
    """The Asset a flow's state changes are announced on."""
    return f"mirrorbook://flows/{quote(source, safe='')}/{quote(target, safe='')}"


class FlowMemory(BaseModel):
    """What the health check knows of a flow between runs."""

    state: str
    previous_state: str | None = None
    since: datetime            # when the check that first found `state` looked
    since_run_id: str          # that check's run: the episode a change starts
    checks: int = 1            # checks in a row that found `state`, that one included
    last_run_id: str


class FlowStateChange(BaseModel):
    flow: str
    source: str
    target: str
    old_state: str | None
    new_state: str
    max_lag: int | None = None
    total_lag: int | None = None
    check_run_id: str
    observed_at: datetime

    @property
    def uri(self) -> str:
        return flow_uri(self.source, self.target)

    def extra(self) -> dict[str, Any]:
        """The Asset event's extra: old/new state, lag, the check's run id."""
        return self.model_dump(mode="json")


def memory(audit: AuditStore, flow: str) -> FlowMemory | None:
    kept = audit.progress_get(MEMORY_RUN, flow)
    return FlowMemory.model_validate(kept) if kept else None


def remember(rb: Runbook, found: list[dict[str, Any]], observed_at: datetime,
             ends: dict[str, tuple[str, str]]) -> list[FlowStateChange]:
    """Compare what this check run found (`found`: the report summary's flows — flow, state, max_lag, total_lag)
    with the memory, update it, and return the changes; each is an audit step `flow.state_changed`.
    `ends`: each flow's (source, target). A retry of the same run changes nothing and returns its changes again."""
    run_id = rb.info.run_id
    changes = []
    for f in found:
        name, state = str(f["flow"]), str(f["state"])
        before = memory(rb.audit, name)
        if before is not None and before.last_run_id == run_id:  # this run counted already (its task retried)
            now, changed = before, before.since_run_id == run_id and before.checks == 1
            old = before.previous_state
        elif before is None or before.state != state:
            now = FlowMemory(state=state, previous_state=before.state if before else None, since=observed_at,
                             since_run_id=run_id, checks=1, last_run_id=run_id)
            changed, old = True, now.previous_state
        else:
            now = before.model_copy(update={"checks": before.checks + 1, "last_run_id": run_id})
            changed, old = False, None
        if changed:
            source, target = ends[name]
            change = FlowStateChange(flow=name, source=source, target=target, old_state=old, new_state=state,
                                     max_lag=f.get("max_lag"), total_lag=f.get("total_lag"), check_run_id=run_id,
                                     observed_at=now.since)
            if now is not before:
                with rb.step("flow.state_changed", name) as step:
                    step.observe({"state": old})
                    step.settle({"state": state})
                    step.note(asset=change.uri, max_lag=change.max_lag, total_lag=change.total_lag)
            changes.append(change)
        if now is not before:
            rb.audit.progress_set(MEMORY_RUN, name, now.model_dump(mode="json"))
    return changes
