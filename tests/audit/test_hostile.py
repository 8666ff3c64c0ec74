"""The store records any request — refused and hostile ones included — on SQLite and PostgreSQL alike:
a megabyte flow, NUL (PostgreSQL's text and varchar reject it), lone surrogates (no UTF-8 for them),
control characters, emoji. Each is stored bounded and escaped, read back in that form, found again by
the value the caller has, and the chain still verifies. Long flows and run ids stay distinct."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mirrorbook.audit import AuditStore, FlowLocked, InvalidAuditData, LockHolder, schema
from mirrorbook.audit.codec import TEXT_LIMIT, escaped
from tests.audit.test_codec import storable

MB = 1_000_000
HOSTILE = {
    "1MB": "x" * MB,
    "251 chars": "f" * 251,
    "10,000 chars": "f" * 10_000,
    "NUL": "A->B\x00; DROP TABLE audit_events",
    "only NUL": "\x00" * 300,
    "lone surrogates": "A\ud800->B\udfff",
    "control characters": "".join(map(chr, range(1, 32))) + "\x7f",
    "emoji": "A😀->B🔥" * 30,
}
SHORT = ("action", "run_id", "dag_id", "task_id", "user", "flow", "snapshot_id")


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _hostile_event(v: str) -> dict[str, Any]:
    return dict(action=v, kind="call", result="refused", mutating=True, run_id=v, dag_id=v, task_id=v, user=v,
                flow=v, snapshot_id=v, error=v, event_id=f"evt-{v}",
                request={"method": v, "path": v, "body": {v: v, "nested": [v, {v: [v]}]}},
                state_before={v: v}, state_after=v, details={v: v, "k": {v: v}})


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_event_is_recorded_read_back_and_verified(store: AuditStore, raw, name: str) -> None:
    v = HOSTILE[name]
    rec = store.record(**_hostile_event(v))
    for field in SHORT:
        kept, width = getattr(rec, field), schema.events.c[field].type.length
        assert len(kept) <= width and storable(kept), field
        if len(escaped(v)) > width:  # the escaped text, cut: its first characters and its length
            assert kept.startswith(escaped(v)[:20]) and f"… ({len(escaped(v))} chars) #" in kept, field
    assert rec.flow.startswith(escaped(v)[:200]), "a flow keeps 200 characters"
    assert len(rec.error) <= TEXT_LIMIT + 30 and storable(rec.error)
    for column in ("request", "state_before", "state_after", "details"):
        text = raw(f"SELECT {column} FROM audit_events WHERE seq = :s", s=rec.seq)[0][0]
        assert len(text) <= TEXT_LIMIT and all(storable(s) for s in _strings(json.loads(text))), column
    assert set(rec.request.model_dump()) == {"method", "path", "body", "status"}

    # read back exactly as stored; found again by the values the caller has, and by those it was shown
    assert store.get(f"evt-{v}") == rec == store.get(rec.event_id)
    assert [r.seq for r in store.events(flow=v)] == [rec.seq] == [r.seq for r in store.events(run_id=v, action=v)]
    assert [r.seq for r in store.events(flow=rec.flow, run_id=rec.run_id)] == [rec.seq]
    assert store.count_mutating(v) == 0  # refused changed nothing
    assert store.verify().ok


def test_nul_and_surrogates_come_back_as_visible_escapes(store: AuditStore) -> None:
    rec = store.record(action="api.call", kind="call", result="refused", flow="A\x00B", user="u\ud800",
                       error="bad\x00body\udfff", details={"k\x00": ["v\ud800", {"\x00": "😀"}]})
    assert rec.flow.startswith("A\\x00B #")  # tagged: a flow "A\\x00B" (a backslash, typed) is another flow
    assert rec.user == "u\\ud800"  # a lone surrogate is not a character: its escape is the value
    assert rec.error == "bad\\x00body\\udfff"
    assert rec.details == {"k\\x00": ["v\\ud800", {"\\x00": "😀"}]}
    assert store.events(flow="A\x00B") == [rec]
    assert store.events(flow="A\\x00B") == []  # the escape a reviewer sees is not the same flow
    assert store.verify().ok


def test_megabyte_values_are_bounded(store: AuditStore, raw) -> None:
    big = "e" * MB
    rec = store.record(action="api.call", kind="call", result="error", flow=big, user=big, error=big,
                       state_before={"offsets": [{"partition": i, "offset": i} for i in range(100_000)]},
                       request={"method": "PATCH", "path": "/connectors/x/offsets", "body": {"text": big}})
    assert rec.flow == rec.user and rec.flow.startswith("e" * 200 + f"… ({MB} chars) #")
    assert rec.error == "e" * TEXT_LIMIT + f"… ({MB} chars)"
    assert rec.request.method == "PATCH" and rec.request.body["text"].endswith(f"… ({MB} chars)")
    assert rec.state_before["offsets"][0] == {"partition": 0, "offset": 0}
    assert rec.state_before["offsets"][-1].endswith(" more")
    sizes = raw("SELECT length(flow), length(error), length(request), length(state_before) FROM audit_events")[0]
    assert sizes[0] <= 250 and all(s <= TEXT_LIMIT + 30 for s in sizes[1:])
    assert store.verify().ok


def test_every_table_keeps_hostile_values_and_finds_them_again(store: AuditStore) -> None:
    now = datetime.now(timezone.utc)
    for name, v in HOSTILE.items():
        sid = store.save_snapshot(v, v, v, {v: v, "n": 1}, run_id=v, note=v)
        snap = store.snapshot(sid)
        assert snap.payload["n"] == 1 and len(snap.subject) <= 500 and storable(snap.note or ""), name
        assert [s.snapshot_id for s in store.snapshots(flow=v, kind=v, run_id=v)] == [sid], name

        store.progress_set(v, v, {v: [v]})
        assert list(store.progress_get(v, v).values()) != [] and store.progress_get(v, "other", 5) == 5, name
        assert len(store.progress(v)) == 1, name

        store.record_metrics(v, now, {v: v, "lag": 3})
        assert store.latest_metrics(v).metrics["lag"] == 3, name

        art = store.record_artifact(v, v, v, {v: v})
        assert len(art.path) <= 4096 + 30 and [a.artifact_id for a in store.artifacts(kind=v, run_id=v)] == \
            [art.artifact_id], name
    assert store.verify().ok


@pytest.mark.parametrize("a, b", [
    ("F" * 200 + "-one", "F" * 200 + "-two"),     # the same 200 characters, then different
    ("F" * 10_000, "F" * 10_001),                 # the same prefix, different lengths
    ("A->B\x00", "A->B\\x00"),                    # a NUL, and the escape it is shown as
])
def test_locks_on_distinct_flows_are_distinct(store: AuditStore, a: str, b: str) -> None:
    store.acquire_lock(a, LockHolder(run_id="run-a"))
    store.acquire_lock(b, LockHolder(run_id="run-b"))  # not "locked by run-a": another flow
    assert store.lock_holder(a).run_id == "run-a" and store.lock_holder(b).run_id == "run-b"
    assert store.release_lock(a, "run-a") and store.lock_holder(a) is None
    assert store.lock_holder(b).run_id == "run-b"


def test_a_flow_forged_to_look_like_a_stored_one_gets_its_own_lock(store: AuditStore, raw) -> None:
    real = "F" * 1000
    store.acquire_lock(real, LockHolder(run_id="run-a"))
    shown = raw("SELECT flow FROM audit_flow_locks")[0][0]  # what a listing shows for `real`
    store.acquire_lock(shown, LockHolder(run_id="run-b"))  # ... sent as a flow of its own: another lock
    assert len(raw("SELECT flow FROM audit_flow_locks")) == 2
    assert not store.release_lock(shown, "run-a") and store.release_lock(shown, "run-b")
    assert store.lock_holder(real).run_id == "run-a"


def test_an_operator_unlocks_a_flow_as_it_was_shown(store: AuditStore, raw) -> None:
    real = "A->B\x00" + "F" * 300
    store.acquire_lock(real, LockHolder(run_id="run-a"))
    shown = raw("SELECT flow FROM audit_flow_locks")[0][0]  # copied from a listing: a NUL cannot be typed
    assert store.lock_holder(shown).run_id == "run-a"
    assert store.force_unlock(shown, user="ops").run_id == "run-a"
    assert store.lock_holder(real) is None
    assert [e.action for e in store.events(flow=shown)] == ["lock.force_unlock"]
    assert store.verify().ok


def test_long_run_ids_sharing_a_prefix_are_different_runs(store: AuditStore) -> None:
    first, second = "manual__" + "r" * 300 + "-1", "manual__" + "r" * 300 + "-2"
    held = store.acquire_lock("A->B", LockHolder(run_id=first))
    assert store.acquire_lock("A->B", LockHolder(run_id=first)) == store.lock_holder("A->B")  # a retry re-enters
    with pytest.raises(FlowLocked) as refused:
        store.acquire_lock("A->B", LockHolder(run_id=second))
    assert len(str(refused.value)) < 1000
    assert not store.release_lock("A->B", second)
    assert store.release_lock("A->B", first) and held.run_id == first


def test_ids_carrying_credentials_are_refused_for_locks_but_recorded(store: AuditStore) -> None:
    with pytest.raises(InvalidAuditData, match="carries a credential"):
        store.acquire_lock("A->B", LockHolder(run_id="run password=hunter2"))
    with pytest.raises(InvalidAuditData, match="carries a credential"):
        store.acquire_lock("http://u:hunter2@x", LockHolder(run_id="r"))
    with pytest.raises(InvalidAuditData, match="lone surrogate"):
        store.acquire_lock("A\ud800->B", LockHolder(run_id="r"))
    assert store.lock_holder("A->B") is None
    rec = store.record(action="lock", kind="step", result="refused", run_id="run password=hunter2")
    assert "hunter2" not in rec.run_id and store.verify().ok


_text = st.text(st.characters(codec=None, categories=None), max_size=300) | \
    st.integers(201, 3000).map(lambda n: "\x00😀\ud800"[n % 3] * n)
_json = st.recursive(st.none() | st.booleans() | st.integers() | _text,
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
                     max_leaves=12)


# A real database per example: modest counts.
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(action=_text.filter(bool), run_id=_text, flow=_text, user=_text, task_id=_text, error=_text,
       details=st.dictionaries(_text, _json, max_size=4), state=_json)
def test_record_never_raises_and_the_chain_verifies(store: AuditStore, action: str, run_id: str, flow: str,
                                                    user: str, task_id: str, error: str, details: dict,
                                                    state: Any) -> None:
    rec = store.record(action=action, kind="call", result="refused", run_id=run_id, flow=flow, user=user,
                       task_id=task_id, error=error, details=details, state_before=state,
                       request={"method": action, "path": flow, "body": details})
    assert all(len(getattr(rec, f)) <= 250 and storable(getattr(rec, f)) for f in ("action", "run_id", "flow"))
    assert rec.seq in [r.seq for r in store.events(run_id=run_id, flow=flow)]
    assert store.verify().ok


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flow=_text, run_id=_text.filter(bool))
def test_any_lock_is_taken_and_released_by_the_names_the_caller_has(store: AuditStore, flow: str,
                                                                    run_id: str) -> None:
    try:
        store.acquire_lock(flow, LockHolder(run_id=run_id))
    except InvalidAuditData:
        return  # an id carrying a credential, refused
    except ValueError:
        return  # a run id no database could store (a lone surrogate): LockHolder refuses it
    assert store.lock_holder(flow) is not None
    assert store.release_lock(flow, run_id) and store.lock_holder(flow) is None
