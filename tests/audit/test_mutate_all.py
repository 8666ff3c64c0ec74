"""Step.mutate_all: independent calls side by side, every intent on record before any call, every outcome after,
a failure raised only once all are recorded — on SQLite and PostgreSQL."""

from __future__ import annotations

import threading

import pytest
from pydantic import BaseModel

from mirrorbook.audit import AuditStore
from mirrorbook.core.engine import Mutation, RunInfo, Runbook


class Expect(BaseModel):
    kind: str = "test"
    n: int


def _calls(do) -> list[Mutation]:
    return [Mutation("groups.alter_offsets", (lambda n=n: do(n)), method="AlterConsumerGroupOffsets",
                     path=f"kafka://B/groups/g{n}", precondition=f"g{n} is EMPTY", expect=Expect(n=n),
                     body={"partitions": 1})
            for n in range(40)]


def test_every_intent_precedes_every_call_and_the_calls_overlap(store: AuditStore) -> None:
    rb = Runbook(RunInfo(run_id="batch-1", task_id="write_offsets"), store)
    seen_open: list[int] = []
    running, peak, lock = [0], [0], threading.Lock()
    gate = threading.Barrier(4, timeout=10)

    def do(n: int) -> str:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        if n < 4:
            gate.wait()  # four calls in flight at once, or this times out
        seen_open.append(len(store.open_intents("batch-1", "write_offsets")))
        with lock:
            running[0] -= 1
        return f"done {n}"

    with rb.step("failover.write_offsets", "A->B") as step:
        out = step.mutate_all(_calls(do), concurrency=8)
    assert out == [f"done {n}" for n in range(40)]  # each call's result, in the calls' order
    assert peak[0] >= 4 and peak[0] <= 8
    assert set(seen_open) == {40}  # every call ran with all 40 intents on record, none closed yet
    assert store.open_intents("batch-1", "write_offsets") == []
    events = store.events(run_id="batch-1")
    calls = [e for e in events if e.kind == "call"]
    assert [e.result for e in calls] == ["intent"] * 40 + ["ok"] * 40  # all intents, then all outcomes
    assert {e.details["intent"] for e in calls[40:]} == {e.event_id for e in calls[:40]}
    assert rb.outcomes[-1].mutations == 40 and rb.outcomes[-1].result == "ok"
    assert store.verify().ok


def test_a_failure_is_raised_after_every_call_ran_and_every_outcome_is_recorded(store: AuditStore) -> None:
    rb = Runbook(RunInfo(run_id="batch-2", task_id="write_offsets"), store)
    ran: list[int] = []

    def do(n: int) -> str:
        ran.append(n)
        if n in (7, 30):
            raise RuntimeError(f"coordinator for g{n} said no")
        return "OK"

    with pytest.raises(RuntimeError, match="g7 said no"):  # the first failure in the calls' order
        with rb.step("failover.write_offsets", "A->B") as step:
            step.mutate_all(_calls(do), concurrency=8)
    assert sorted(ran) == list(range(40))  # a failure stops no other independent call
    outcomes = [e for e in store.events(run_id="batch-2") if e.kind == "call" and e.result != "intent"]
    assert len(outcomes) == 40 and store.open_intents("batch-2", "write_offsets") == []
    failed = sorted(e.request.path for e in outcomes if e.result == "error")
    assert failed == ["kafka://B/groups/g30", "kafka://B/groups/g7"]
    assert rb.outcomes[-1].mutations == 38 and rb.outcomes[-1].result == "error"


def test_a_dry_run_plans_every_call_and_makes_none(store: AuditStore) -> None:
    rb = Runbook(RunInfo(run_id="batch-3", task_id="write_offsets"), store, dry_run=True)
    with rb.step("failover.write_offsets", "A->B") as step:
        out = step.mutate_all(_calls(lambda n: pytest.fail("a dry run made a call")), concurrency=8)
    assert out == [None] * 40
    assert [p.path for p in rb.outcomes[-1].planned] == [f"kafka://B/groups/g{n}" for n in range(40)]
    assert {e.result for e in store.events(run_id="batch-3") if e.kind == "call"} == {"planned"}
    assert store.open_intents("batch-3") == []
