"""The health check as the mm2_health_check task runs it: a pass, restarts if asked (then a second look
at those flows), the exact RPO of unplanned failovers whose source answers again, one metrics sample
per flow in the audit store, and an audit event for each DATA_LOSS newly counted and each TARGET_RESET."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from mirrorbook.audit import AuditStore
from mirrorbook.bounds import cut
from mirrorbook.clients import Clients
from mirrorbook.errors import MirrorbookError
from mirrorbook.redaction import get_logger
from mirrorbook.runbooks import readiness, rpo
from mirrorbook.runbooks.engine import Runbook
from mirrorbook.runbooks.health.loss import DATA_LOSS, TARGET_RESET
from mirrorbook.runbooks.health.one_pass import collect_once
from mirrorbook.runbooks.health.params import HealthParams
from mirrorbook.runbooks.health.restarts import failed_roles, restart_failed
from mirrorbook.runbooks.health.results import FlowHealth, HealthReport
from mirrorbook.topology import FlowSpec, Topology

log = get_logger(__name__)


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
    if params.readiness:
        keep_readiness(clients, topology, report, audit)
    complete_rpo(clients, topology, report, rb)
    for fh in report.flows:
        audit.record_metrics(fh.flow, report.observed_at, fh.metrics(report.observed_at))
        record_loss(rb, fh)
    return report


def record_loss(rb: Runbook, fh: FlowHealth) -> None:
    """The audit trail's account of lost records: one event when a pass counts records of a DATA_LOSS no pass
    counted before (a gap that stays open is not recorded again), one per pass that finds a TARGET_RESET."""
    loss = fh.loss
    if loss is None:
        return
    new = [g for g in loss.gaps if g.new or g.new_high]
    if new:
        rb.audit.append(rb.event(action=f"health.{DATA_LOSS.lower()}", kind="step", result="ok", flow=fh.flow,
                                 details={"records": sum(g.new for g in new), "source": fh.source,
                                          "records_high": sum(g.new if g.new_high is None else g.new_high
                                                              for g in new),
                                          "partitions": [g.model_dump() | {"records": g.records} for g in new],
                                          "records_lost_total": loss.total()}))
    if loss.resets:
        rb.audit.append(rb.event(action=f"health.{TARGET_RESET.lower()}", kind="step", result="ok", flow=fh.flow,
                                 details={"records": sum(r.records for r in loss.resets), "target": fh.target,
                                          "partitions": [r.model_dump() for r in loss.resets],
                                          "records_lost_total": loss.total()}))


def keep_readiness(clients: Clients, topology: Topology, report: HealthReport, audit: AuditStore) -> None:
    """Each flow whose source was readable this pass: its readiness positions brought up to date, side by side.
    A failure is kept in the sample (the failover then falls back on older positions), never fatal here."""
    flows = [fh for fh in report.flows if fh.committed is not None]

    def one(fh: FlowHealth) -> readiness.Readiness:
        flow = topology.flow(fh.flow)
        try:
            return readiness.refresh(clients, flow, topology.groups_regex(flow), fh.committed or {}, audit,
                                     report.observed_at)
        except MirrorbookError as exc:
            log.warning("readiness of %s not refreshed: %s", fh.flow, exc)
            return readiness.Readiness(checked_at=report.observed_at, error=cut(str(exc)))
    with ThreadPoolExecutor(max_workers=max(1, min(4, len(flows)))) as pool:
        for fh, result in zip(flows, pool.map(one, flows)):
            fh.readiness = result


def complete_rpo(clients: Clients, topology: Topology, report: HealthReport, rb: Runbook) -> None:
    """Each flow whose source answered this pass: the exact RPO of its unplanned failovers still without one
    (the first pass to reach a returned source counts it). A failure is logged, left for the next pass."""
    for fh in report.flows:
        if fh.committed is None:
            continue
        try:
            for figure in rpo.complete(rb, clients, topology.flow(fh.flow)):
                log.info("exact RPO of failover run %s: %s", figure["failover_run_id"], rpo.render_exact(figure))
        except Exception as exc:  # counting a past failover's loss must not fail the health check itself
            log.warning("exact RPO of %s not computed: %s", fh.flow, exc)
