"""The store against its newest anchor: the comparison `mirrorbook audit verify --anchors` makes (pure)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from hypothesis import given, strategies as st

from mirrorbook.runbooks.anchors import Anchor, compare, newest

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)


def _anchor(seq: int, hash_: str = "h", minutes: int = 0) -> Anchor:
    return Anchor(store="s1", seq=seq, hash=hash_, at=T0 + timedelta(minutes=minutes), run_id=f"run-{seq}")


def test_no_anchor_passes_and_says_the_tail_is_not_witnessed():
    check = compare(None, 10, None)
    assert check.ok and check.missing is None and "not witnessed" in check.reason


def test_a_store_at_or_past_its_anchor_with_the_same_hash_passes():
    assert compare(_anchor(5, "h5"), 5, "h5").ok
    assert compare(_anchor(5, "h5"), 9, "h5").ok  # later runs appended: still the same chain at 5


def test_a_truncated_tail_fails_with_the_missing_range():
    check = compare(_anchor(12, "h12"), 9, None)
    assert not check.ok and check.missing == (10, 12)
    assert "events 10..12 are missing" in check.reason and "seq 12" in check.reason and "run-12" in check.reason


def test_everything_cut_fails_from_seq_one():
    assert compare(_anchor(3), 0, None).missing == (1, 3)


def test_a_cut_tail_rewritten_past_the_anchor_fails_at_the_anchored_seq():
    # Truncated to 7, then new events appended up to 20: the head is past the anchor, the hash at 12 is not ours.
    check = compare(_anchor(12, "h12"), 20, "other")
    assert not check.ok and check.missing == (12, 12) and "rewritten at or before seq 12" in check.reason
    assert not compare(_anchor(12, "h12"), 20, None).ok  # no event at the anchored seq at all


def test_newest_is_the_longest_chain_then_the_latest():
    assert newest([]) is None
    assert newest([_anchor(3, minutes=9), _anchor(7, minutes=1), _anchor(5, minutes=5)]).seq == 7
    assert newest([_anchor(7, "a", minutes=1), _anchor(7, "b", minutes=2)]).hash == "b"


@given(anchored=st.integers(1, 10**9), head=st.integers(0, 10**9))
def test_truncation_is_found_exactly_when_the_head_is_below_the_anchor(anchored: int, head: int):
    check = compare(_anchor(anchored, "h"), head, "h" if head >= anchored else None)
    assert check.ok == (head >= anchored)
    if head < anchored:
        assert check.missing == (head + 1, anchored)


def test_an_anchor_holds_no_more_than_its_fields():
    # Only hashes, sequence numbers, a time and a run id: nothing else is accepted into (or shown from) one.
    fields = set(_anchor(1).model_dump())
    assert fields == {"store", "seq", "hash", "at", "run_id"}
