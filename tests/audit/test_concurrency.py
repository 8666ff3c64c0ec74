"""Airflow runs tasks in separate processes: concurrent appends and lock races must stay consistent."""

from __future__ import annotations

import multiprocessing as mp

from mirrorbook.audit import AuditStore, FlowLocked, LockHolder

PROCESSES = 4
EVENTS_EACH = 50


def _append_many(url: str, worker: int, start: mp.synchronize.Event) -> None:
    store = AuditStore(url)
    start.wait()
    for i in range(EVENTS_EACH):
        store.record(action="offsets.alter", kind="call", result="ok", mutating=True, run_id=f"run-{worker}",
                     flow="A->B", details={"i": i})


def _try_lock(url: str, worker: int, start: mp.synchronize.Event, won: mp.Queue) -> None:
    store = AuditStore(url)
    start.wait()
    try:
        store.acquire_lock("A->B", LockHolder(run_id=f"run-{worker}", dag_id="mm2_failover", user=f"u{worker}"))
        won.put(worker)
    except FlowLocked:
        won.put(None)


def _run(target, *args) -> None:
    ctx = mp.get_context("fork")
    start = ctx.Event()
    procs = [ctx.Process(target=target, args=(args[0], w, start, *args[1:])) for w in range(PROCESSES)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0, f"worker exited with {p.exitcode}"


def test_concurrent_appends_keep_one_valid_chain(store: AuditStore, audit_url: str) -> None:
    store.record(action="step.precheck", kind="step", result="ok")  # the parent's engine is in use before fork
    _run(_append_many, audit_url)
    result = store.verify()
    assert result.ok, result.summary()
    assert result.checked == 1 + PROCESSES * EVENTS_EACH
    for w in range(PROCESSES):
        assert [e.details["i"] for e in store.events(run_id=f"run-{w}")] == list(range(EVENTS_EACH))
        assert store.count_mutating(f"run-{w}") == EVENTS_EACH


def test_exactly_one_process_gets_the_flow_lock(store: AuditStore, audit_url: str) -> None:
    won: mp.Queue = mp.get_context("fork").Queue()
    _run(_try_lock, audit_url, won)
    results = [won.get(timeout=10) for _ in range(PROCESSES)]
    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    assert store.lock_holder("A->B").run_id == f"run-{winners[0]}"


def _first_use(url: str, worker: int, start: mp.synchronize.Event) -> None:
    start.wait()
    AuditStore(url).record(action="step.first", kind="step", result="ok", run_id=f"run-{worker}")


def test_concurrent_first_use_creates_the_schema_once(audit_url: str) -> None:
    _run(_first_use, audit_url)
    result = AuditStore(audit_url).verify()
    assert result.ok and result.checked == PROCESSES
