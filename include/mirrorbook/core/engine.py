"""The step engine every runbook shares: read state -> decide -> act only if needed -> wait -> audit.

A `Runbook` carries who runs what (run id, DAG, task, user, flow), the audit store and the dry-run
flag. `with rb.step("connector.stop", ...) as step:` records one step event; inside, every mutating
call goes through `step.mutate(...)`, which either performs it and audits the call, or — in a dry
run — records it as planned with the precondition it checked, and performs nothing.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Generic, Iterator, Sequence, TypeVar

from pydantic import BaseModel, Field

from mirrorbook.audit import AuditEvent, AuditStore
from mirrorbook.audit.models import RequestSummary
from mirrorbook.errors import ALREADY_CHANGED, MirrorbookError, Refused
from mirrorbook.redaction import get_logger
from mirrorbook.core.changes import Changes, accepted, roles_noted

log = get_logger(__name__)
T = TypeVar("T")


class RunInfo(BaseModel):
    run_id: str
    dag_id: str | None = None
    task_id: str | None = None
    user: str | None = None


class PlannedCall(BaseModel):
    """One mutating call a dry run would make, and why."""

    action: str
    method: str
    path: str
    body: dict[str, Any] | None = None
    precondition: str

    def describe(self) -> str:
        body = f" {self.body}" if self.body else ""
        return f"{self.method} {self.path}{body}   [because: {self.precondition}]"


class StepOutcome(BaseModel):
    step: str
    flow: str | None
    result: str  # ok | noop | planned | refused | error
    mutations: int = 0
    planned: list[PlannedCall] = Field(default_factory=list)
    before: Any = None
    after: Any = None
    details: dict[str, Any] = Field(default_factory=dict)
    snapshot_id: str | None = None


def _now() -> datetime:
    return datetime.now(timezone.utc)


def summarize_body(body: Any, limit: int = 5) -> dict[str, Any] | None:
    """A short, secret-free description of a request body (full data lives in snapshots)."""
    if body is None:
        return None
    if isinstance(body, dict) and isinstance(body.get("offsets"), list):
        entries = body["offsets"]
        return {"offsets": len(entries), "first": entries[:limit]}
    if isinstance(body, dict):
        return {k: body[k] for k in list(body)[:20]}
    return {"value": str(body)[:200]}


@dataclass(frozen=True)
class Mutation(Generic[T]):
    """One mutating call, as `Step.mutate_all` takes it (see `Step.mutate` for the fields)."""

    action: str
    do: Callable[[], T]
    method: str
    path: str
    precondition: str
    expect: BaseModel
    body: Any = None


def _perform(calls: Sequence[Callable[[], Any]], concurrency: int) -> list[tuple[bool, Any]]:
    """Run every call, up to `concurrency` at once: (True, result) or (False, the exception) each, in order."""
    def attempt(do: Callable[[], Any]) -> tuple[bool, Any]:
        try:
            return True, do()
        except Exception as exc:  # recorded as the call's outcome and raised by the caller
            return False, exc

    if concurrency <= 1 or len(calls) == 1:
        return [attempt(do) for do in calls]
    with ThreadPoolExecutor(max_workers=min(concurrency, len(calls)), thread_name_prefix="mutate") as pool:
        return list(pool.map(attempt, calls))


class Step:
    def __init__(self, rb: "Runbook", action: str, flow: str | None) -> None:
        self.rb, self.action, self.flow = rb, action, flow
        self.outcome = StepOutcome(step=action, flow=flow, result="noop")

    def observe(self, before: Any) -> None:
        self.outcome.before = before

    def settle(self, after: Any) -> None:
        self.outcome.after = after

    def note(self, **details: Any) -> None:
        self.outcome.details.update(details)

    def snapshot(self, kind: str, subject: str, payload: dict[str, Any], note: str | None = None) -> str | None:
        """Keep what a mutation is about to overwrite. Dry runs take no snapshot (nothing is overwritten)."""
        if self.rb.dry_run:
            return None
        sid = self.rb.audit.save_snapshot(kind, self.flow, subject, payload, run_id=self.rb.info.run_id, note=note)
        self.outcome.snapshot_id = sid
        return sid

    def mutate(self, action: str, do: Callable[[], T], *, method: str, path: str, body: Any = None,
               precondition: str, expect: BaseModel) -> T | None:
        """Perform (and audit) one mutating call — or, in a dry run, only plan it.

        Write-ahead: the intent (the call, its precondition, its snapshot link, and `expect` — what the call
        leaves in place, see runbooks/intents.py) is committed before the call is made, its outcome after.
        A process killed in between leaves the intent open for the next attempt to check and record."""
        return self.mutate_all([Mutation(action, do, method=method, path=path, body=body,
                                         precondition=precondition, expect=expect)])[0]

    def mutate_all(self, calls: Sequence[Mutation[T]], *, concurrency: int = 1) -> list[T | None]:
        """`mutate` for independent calls (one per consumer group, say), side by side up to `concurrency`.

        Every intent is committed, in one transaction, before any call is made, and every outcome after all
        of them, in one more — a commit's fsync, not the call, is what a thousand small writes cost. Every
        call is attempted; a failure is raised (the first, in the calls' order) once all outcomes are on
        record. Returns each call's result, in order (all None in a dry run)."""
        if not calls:
            return []
        requests = [RequestSummary(method=c.method, path=c.path, body=summarize_body(c.body)) for c in calls]
        # The part of a flow the step acts on (`note(connector=…, role=…)`), on each call's record too: what a failed
        # task says it changed names the part, even for a call whose step has not closed yet (stops side by side).
        noted = self.outcome.details
        part = {k: noted[k] for k in ("connector", "role") if isinstance(noted.get(k), str)}
        if self.rb.dry_run:
            planned = [PlannedCall(action=c.action, method=c.method, path=c.path, body=r.body,
                                   precondition=c.precondition) for c, r in zip(calls, requests)]
            self.outcome.planned.extend(planned)
            self.rb.audit.append_all([self.rb.event(action=c.action, kind="call", result="planned", mutating=True,
                                                    flow=self.flow, request=r,
                                                    details={"precondition": c.precondition, **part})
                                      for c, r in zip(calls, requests)])
            for p in planned:
                log.info("[dry run] would %s", p.describe())
            return [None] * len(calls)
        started = _now()
        intents = self.rb.audit.begin_intents([
            (self.rb.event(action=c.action, kind="call", result="intent", mutating=True, flow=self.flow, request=r,
                           started_at=started, snapshot_id=self.outcome.snapshot_id,
                           details={"precondition": c.precondition, **part}), c.expect.model_dump(mode="json"))
            for c, r in zip(calls, requests)])
        results = _perform([c.do for c in calls], concurrency)
        self.rb.audit.close_intents([  # their records are not needed here: not read back
            (intent.event_id, self.rb.event(
                action=c.action, kind="call", result="ok" if ok else "error", mutating=True, flow=self.flow,
                request=r if ok else r.model_copy(update={"status": _status_of(out)}),
                error=None if ok else str(out), started_at=started,
                snapshot_id=self.outcome.snapshot_id if ok else None, details={"precondition": c.precondition, **part}))
            for intent, c, r, (ok, out) in zip(intents, calls, requests, results)], records=False)
        self.outcome.mutations += sum(ok for ok, _ in results)
        for c, (ok, _) in zip(calls, results):
            if ok:
                self.rb.changes.add(c.action, c.method, c.path, self._role_of)
        failed = [out for ok, out in results if not ok]
        for exc in failed[1:]:
            log.error("%s also failed: %s", self.action, exc)
        if failed:
            raise failed[0]
        return [out for _, out in results]

    def _role_of(self, connector: str) -> str | None:
        """`A->B source` for the connector this step noted it acts on (`note(connector=…, role=…)`)."""
        d = self.outcome.details
        role = d.get("role")
        return f"{self.flow} {role}" if d.get("connector") == connector and isinstance(role, str) and self.flow \
            else None


class Runbook:
    """One runbook task's view of the run: identity, audit store, dry-run flag, and its steps' outcomes."""

    def __init__(self, info: RunInfo, audit: AuditStore, *, dry_run: bool = False) -> None:
        self.info = info
        self.audit = audit
        self.dry_run = dry_run
        self.outcomes: list[StepOutcome] = []
        # What this attempt's accepted calls changed (what `task_changes` falls back on without the audit trail).
        self.changes = Changes()

    def event(self, **fields: Any) -> AuditEvent:
        """An event of this run's task, as its steps record them."""
        return AuditEvent(run_id=self.info.run_id, dag_id=self.info.dag_id, task_id=self.info.task_id,
                          user=self.info.user, **fields)

    def _event(self, **fields: Any) -> None:
        self.audit.append(self.event(**fields))

    @contextmanager
    def step(self, action: str, flow: str | None) -> Iterator[Step]:
        step = Step(self, action, flow)
        started = _now()
        t0 = time.monotonic()
        try:
            yield step
        except Refused as exc:
            step.outcome.result = "refused"
            self._tell_changes(exc, step)
            self._finish(step, started, t0, error=str(exc))
            raise
        except Exception as exc:
            step.outcome.result = "error"
            self._tell_changes(exc, step)
            self._finish(step, started, t0, error=str(exc))
            raise
        else:
            o = step.outcome
            o.result = "planned" if o.planned else "ok" if o.mutations else "noop"
            self._finish(step, started, t0)

    def task_changes(self, step: Step | None = None) -> Changes:
        """What this task changed: its accepted calls in the audit trail — this attempt's and any earlier attempt's
        of the same task (a retried task's first try may have done the changing) — or, if the trail cannot be read,
        this attempt's as kept here."""
        try:  # the task's own events (a run's other tasks may have written thousands of groups: not kept here)
            events = [e for e in self.audit.iter_events(run_id=self.info.run_id) if e.task_id == self.info.task_id
                      and (e.kind == "step" or (e.kind == "call" and e.mutating and e.result == "ok"))]
        except Exception as exc:  # noqa: BLE001 — the audit store may be what failed: this attempt's, then
            log.warning("the audit trail could not be read for what this task changed: %s", type(exc).__name__)
            return self.changes
        roles = roles_noted(events)
        if step is not None:
            roles.update(roles_noted([self.event(action=f"step.{step.action}", kind="step", result="error",
                                                 mutating=False, flow=step.flow, details=step.outcome.details)]))
        return accepted(events, roles.get)

    def _tell_changes(self, exc: BaseException, step: Step | None = None) -> None:
        """A task that fails half-way says in its own error what it already changed (the on-call reads the error
        first): bounded, from what the audit keeps of each call (no secret). A non-mirrorbook error gets it as a
        note (`guarded` shows notes). A dry run changed nothing."""
        if self.dry_run:
            return
        changes = self.task_changes(step)
        if not changes:
            return
        said = str(changes)
        if isinstance(exc, MirrorbookError):
            exc.changed = said  # an outer step sees the same changes, or more: the latest wins
        elif not any(n.startswith(ALREADY_CHANGED) for n in getattr(exc, "__notes__", [])):
            _add_note(exc, f"{ALREADY_CHANGED}: {said}")

    def _finish(self, step: Step, started: datetime, t0: float, error: str | None = None) -> None:
        o = step.outcome
        o.details["duration_s"] = round(time.monotonic() - t0, 3)
        self._event(action=f"step.{step.action}", kind="step", result=o.result, mutating=False, flow=step.flow,
                    state_before=o.before, state_after=o.after, error=error, started_at=started,
                    snapshot_id=o.snapshot_id, details={**o.details, "mutations": o.mutations,
                                                        "planned": [p.model_dump() for p in o.planned]})
        self.outcomes.append(o)

    # -- progress that survives task retries (XCom does not) ---------------------------------------
    def progress_get(self, key: str, default: Any = None) -> Any:
        return self.audit.progress_get(self.info.run_id, key, default)

    def progress_set(self, key: str, value: Any) -> None:
        """Also in dry runs: a dry run's plan is what its later tasks render (it changes no cluster)."""
        self.audit.progress_set(self.info.run_id, key, value)

    def summary(self) -> dict[str, Any]:
        return {"run_id": self.info.run_id, "dry_run": self.dry_run,
                "mutations": sum(o.mutations for o in self.outcomes),
                "steps": [o.model_dump(mode="json") for o in self.outcomes]}


def _add_note(exc: BaseException, note: str) -> None:
    if sys.version_info >= (3, 11):
        exc.add_note(note)
    else:  # Python 3.10 (still supported) has no add_note: `guarded` reads __notes__ all the same
        setattr(exc, "__notes__", [*getattr(exc, "__notes__", []), note])


def _status_of(exc: BaseException) -> int | None:
    """The status code a refused or failed call answered with (a Connect REST error's), if it has one."""
    status = getattr(exc, "status", None)
    return status if isinstance(status, int) else None
