"""The per-flow lock: one runbook per flow at a time, held in the audit store so every worker sees it."""

from __future__ import annotations

from typing import Callable

from mirrorbook.audit import FlowLocked
from mirrorbook.audit.models import LockHolder
from mirrorbook.runbooks.engine import GateRefused, Runbook, StepOutcome
from mirrorbook.topology import FlowSpec


def acquire(rb: Runbook, flows: list[FlowSpec],
            is_stale: Callable[[LockHolder], bool] | None = None) -> StepOutcome:
    """Lock every flow the runbook touches (in name order, so two runbooks never wait on each other)."""
    names = sorted({f.name for f in flows})
    with rb.step("lock.acquire", names[0]) as step:
        step.note(flows=names)
        if rb.dry_run:
            step.note(reason="dry run: nothing will change, the flows are not locked")
            return step.outcome
        holder = LockHolder(run_id=rb.info.run_id, dag_id=rb.info.dag_id, user=rb.info.user)
        taken: list[str] = []
        try:
            for name in names:
                rb.audit.acquire_lock(name, holder, is_stale=is_stale)
                taken.append(name)
        except FlowLocked as exc:
            for name in taken:
                rb.audit.release_lock(name, rb.info.run_id)
            raise GateRefused(str(exc.message), exc.hint) from exc
        step.settle({"holder": holder.describe(), "flows": names})
    return step.outcome


def release(rb: Runbook, flows: list[FlowSpec]) -> StepOutcome:
    names = sorted({f.name for f in flows})
    with rb.step("lock.release", names[0]) as step:
        step.note(released={name: rb.audit.release_lock(name, rb.info.run_id) for name in names})
    return step.outcome
