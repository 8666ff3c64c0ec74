"""The per-flow lock: one runbook per flow at a time, held in the audit store so every worker sees it."""

from __future__ import annotations

from typing import Callable

from mirrorbook.audit import FlowLocked
from mirrorbook.audit.models import LockHolder
from mirrorbook.runbooks.engine import GateRefused, Runbook, StepOutcome
from mirrorbook.topology import FlowSpec


def acquire(rb: Runbook, flow: FlowSpec, is_stale: Callable[[LockHolder], bool] | None = None) -> StepOutcome:
    with rb.step("lock.acquire", flow.name) as step:
        if rb.dry_run:
            step.note(reason="dry run: nothing will change, the flow is not locked")
            return step.outcome
        holder = LockHolder(run_id=rb.info.run_id, dag_id=rb.info.dag_id, user=rb.info.user)
        try:
            got = rb.audit.acquire_lock(flow.name, holder, is_stale=is_stale)
        except FlowLocked as exc:
            raise GateRefused(str(exc.message), exc.hint or "wait for that run to finish; "
                              f"if it is dead: mirrorbook audit unlock '{flow.name}'") from exc
        step.settle({"holder": got.describe()})
    return step.outcome


def release(rb: Runbook, flow: FlowSpec) -> StepOutcome:
    with rb.step("lock.release", flow.name) as step:
        released = rb.audit.release_lock(flow.name, rb.info.run_id)
        step.note(released=released)
    return step.outcome
