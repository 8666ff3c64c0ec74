"""The health check as the mm2_health_check task runs it: a pass, restarts if asked (then a second look
at those flows), and one metrics sample per flow in the audit store."""

from __future__ import annotations

from mirrorbook.audit import AuditStore
from mirrorbook.clients import Clients
from mirrorbook.runbooks.engine import Runbook
from mirrorbook.runbooks.health.one_pass import collect_once
from mirrorbook.runbooks.health.params import HealthParams
from mirrorbook.runbooks.health.restarts import failed_roles, restart_failed
from mirrorbook.runbooks.health.results import HealthReport
from mirrorbook.topology import FlowSpec, Topology


def run_health_check(clients: Clients, topology: Topology, flows: list[FlowSpec], params: HealthParams,
                     audit: AuditStore, rb: Runbook) -> HealthReport:
    """Collect; restart FAILED parts if asked (then look again at those flows); record one sample per flow."""
    report = collect_once(clients, topology, flows, params, audit)
    todo = {fh.flow: roles for fh in report.flows if (roles := failed_roles(fh.status))} \
        if params.restart_failed else {}
    if todo:
        notes = {name: restart_failed(rb, clients, topology.flow(name), roles, params.restart_timeout_s)
                 for name, roles in todo.items()}
        again = collect_once(clients, topology, [topology.flow(n) for n in todo], params, audit)
        fresh = {fh.flow: fh for fh in again.flows}
        for fh in fresh.values():
            fh.restarted = notes[fh.flow]
        report = HealthReport(observed_at=again.observed_at, elapsed_s=report.elapsed_s + again.elapsed_s,
                              flows=[fresh.get(fh.flow, fh) for fh in report.flows])
    for fh in report.flows:
        audit.record_metrics(fh.flow, report.observed_at, fh.metrics(report.observed_at))
    return report
