"""The per-flow lock: one runbook per flow at a time, held in the audit store so every worker sees it.

A lock outlives a run that died holding it (a killed worker runs no teardown). The next run takes it over
when the holder is provably gone — its DAG run finished (Airflow marks a run whose task process died as
failed), or, for a holder that is no DAG run (a flows-API call, a health check's restart), its lease ran
out — audits the takeover with both run ids, and settles the dead run's unrecorded calls (intents.py)
before anything else. A live holder is never taken over: the store swaps holders atomically.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Callable

from mirrorbook.audit import FlowLocked
from mirrorbook.audit.models import LockHolder
from mirrorbook.clients import Clients
from mirrorbook.runbooks import intents
from mirrorbook.core.engine import Runbook, StepOutcome
from mirrorbook.errors import GateRefused
from mirrorbook.topology import FlowSpec

# DAG run states after which a run holds nothing any more.
FINISHED = ("success", "failed")
# Holders that are no DAG run make a few calls under a minute's waits each: an hour is far past any of them.
LEASE_S = 3600.0

RunState = Callable[[str, str], str | None]  # (dag_id, run_id) -> the DAG run's state


def holder_gone(holder: LockHolder, run_state: RunState | None, now: datetime | None = None) -> str | None:
    """Why `holder` can no longer be running, or None while it may be."""
    if holder.dag_id is None:
        age = ((now or datetime.now(timezone.utc)) - holder.acquired_at).total_seconds()
        return f"it is no DAG run and its {LEASE_S:.0f} s lease ran out {age - LEASE_S:.0f} s ago" if age > LEASE_S \
            else None
    if run_state is None:
        return None
    try:
        state = run_state(holder.dag_id, holder.run_id)
        state = str(getattr(state, "value", state))  # Airflow answers with an enum
    except Exception:  # unknown (e.g. the run was deleted): never take a lock over on a guess
        return None
    return f"its DAG run of {holder.dag_id} is {state}" if state in FINISHED else None


def acquire(rb: Runbook, flows: list[FlowSpec], clients: Clients, run_state: RunState | None = None) -> StepOutcome:
    """Lock every flow the runbook touches (in name order, so two runbooks never wait on each other), taking
    over from a holder that is gone, then settle any dead run's unrecorded calls on them."""
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
                rb.audit.acquire_lock(name, holder, is_stale=lambda h: holder_gone(h, run_state))
                taken.append(name)
        except FlowLocked as exc:
            for name in taken:
                rb.audit.release_lock(name, rb.info.run_id)
            raise GateRefused(str(exc.message), exc.hint) from exc
        step.settle({"holder": holder.describe(), "flows": names})
    intents.reconcile(rb, clients, flows, held=True)
    return step.outcome


def release(rb: Runbook, flows: list[FlowSpec]) -> StepOutcome:
    names = sorted({f.name for f in flows})
    with rb.step("lock.release", names[0]) as step:
        step.note(released={name: rb.audit.release_lock(name, rb.info.run_id) for name in names})
    return step.outcome
