"""Reusing what the health check proved: a kept position is reused only while it is exactly as true as a fresh
proof. A scene (the simulated MM2 copy of test_precise_alignment) is proved at a health check (t0); then records
arrive and MM2 copies them (re-sending after a restart, maybe), its offset-syncs topic is compacted, retention
moves, groups commit; at the failover (t1) the plan takes the kept positions `still_true` keeps and proves the
rest, and is compared row by row with a fresh translation of everything at t1 — by the oracle's truth."""

from __future__ import annotations

from datetime import datetime, timezone

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from mirrorbook.audit.codec import format_time
from mirrorbook.mm2.precise import ALIGNED, ALIGNED_END, Marks
from mirrorbook.runbooks.readiness import Kept, still_true
from tests.unit.test_precise_alignment import ABORTED, MARKER, RECORD, Scene, exact, mm2_copy, read

NOW = format_time(datetime(2026, 1, 1, tzinfo=timezone.utc))


@st.composite
def histories(draw):
    """(the scene at the health check, the scene at the failover, each group's committed offset at both)."""
    n1 = draw(st.integers(1, 50))
    kinds = [draw(st.sampled_from([RECORD] * 8 + [MARKER, ABORTED])) for _ in range(n1)]
    contents = {o: (b"k", b"v%d" % o, (), 1000 + o) for o, k in enumerate(kinds) if k != MARKER}
    copies_aborted = draw(st.booleans())
    view = [o for o, k in enumerate(kinds) if k == RECORD or (k == ABORTED and copies_aborted)]
    restarts = [(draw(st.integers(1, 50)), draw(st.integers(0, 6))) for _ in range(draw(st.integers(0, 2)))]
    sends, syncs = mm2_copy(view, 0, len(view), restarts, draw(st.sampled_from([0, 3, 100])),
                            set(draw(st.lists(st.integers(0, 40), max_size=6))), draw(st.sampled_from([0, 5])))
    # The health check ran after MM2 had written k0 copies, while the source held n0 offsets.
    k0 = draw(st.integers(0, len(sends)))
    n0 = draw(st.integers(max(sends[:k0], default=-1) + 1, n1))
    syncs0 = [x for x in syncs if x.downstream_offset < k0]
    syncs1 = syncs if draw(st.booleans()) else syncs[-1:]  # the cleaner ran since: only the newest sync is left
    window = draw(st.sampled_from([4, 100_000]))
    committed0 = draw(st.lists(st.integers(0, n0), min_size=1, max_size=10))
    committed1 = [c if draw(st.integers(0, 2)) else draw(st.integers(0, n1)) for c in committed0]
    s_low1 = draw(st.integers(0, n1)) if draw(st.integers(0, 4)) == 0 else 0
    t_low1 = draw(st.integers(0, len(sends))) if draw(st.integers(0, 4)) == 0 else 0
    at0 = Scene(kinds[:n0], {o: c for o, c in contents.items() if o < n0}, copies_aborted, copies_aborted,
                sends[:k0], syncs0, 0, 0, sorted(set(committed0)), window, True)
    at1 = Scene(kinds, contents, copies_aborted, copies_aborted, sends, syncs1, s_low1, t_low1,
                sorted(set(committed1)), window, True)
    return at0, at1, list(zip(committed0, committed1))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_a_reused_position_is_as_true_as_a_fresh_proof_row_by_row(history):
    at0, at1, groups = history
    checked, _, _ = read(at0)
    kept = {c0: checked.position(c0) for c0, _ in groups}  # what the health check keeps
    fresh_at1, sm, tm = read(at1)
    reused = 0
    for c0, c1 in groups:
        proof0 = kept[c0]
        k = Kept("t", c0, proof0.offset if proof0.proven else 0, f"precise:{proof0.rule}", proof0.proven, NOW)
        why = still_true(k, c1, sm, tm, same_topics=True, compacted=False)
        fresh = fresh_at1.position(c1)
        if why is not None:
            continue  # the plan proves this one now: the same proof as the fresh translation's
        reused += 1
        assert c1 == c0 and proof0.proven
        # The reused row is exact now, by the truth...
        assert exact(at1, c1, k.target_offset), (c1, k, at1)
        # ... and, row by row, what a fresh translation finds: the same offset, or — MM2 copied the record twice
        # — another copy of the same record.
        if fresh.proven and fresh.offset != k.target_offset:
            assert at1.sends[fresh.offset] == at1.sends[k.target_offset], (c1, fresh, k)
    event(f"positions reused: {min(reused, 3)}{'+' if reused >= 3 else ''}")


def test_still_true_names_why_a_kept_position_is_proved_again():
    marks = Marks(0, 100)
    k = Kept("t", 40, 42, f"precise:{ALIGNED}", True, NOW)
    assert still_true(k, 40, marks, marks, True, False) is None
    assert still_true(k, 41, marks, marks, True, False) == "the group committed since"
    assert still_true(k._replace(exact=False, rule="fallback:earliest"), 40, marks, marks, True, False) == \
        "not proven when kept"
    end = k._replace(rule=f"precise:{ALIGNED_END}", target_offset=42)
    assert still_true(end, 40, marks, marks, True, False) == "it stood for the source's end, which moved"
    assert still_true(end, 40, Marks(0, 40), Marks(0, 42), True, False) is None  # both ends where they were
    assert still_true(end, 40, Marks(0, 40), Marks(0, 43), True, False) == "it stood for the source's end, which moved"
    assert still_true(end, 40, Marks(0, 40), Marks(42, 42), True, False) == \
        "the target no longer holds the copy of the source's last record (retention)"
    assert still_true(k, 40, marks, marks, False, False) == "a topic was deleted and created again since"
    assert "compacted" in still_true(k, 40, marks, marks, True, True)
    assert still_true(k, 40, Marks(41, 100), marks, True, False) == "the source's log start passed the committed offset"
    assert still_true(k, 40, marks, Marks(43, 100), True, False) == "the target no longer holds the copy (retention)"
