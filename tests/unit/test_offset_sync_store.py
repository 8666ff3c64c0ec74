"""The OffsetSyncStore port against Kafka's OffsetSyncStoreTest vectors, and sync windows."""

from __future__ import annotations

from mirrorbook.kafka.types import TP
from mirrorbook.mm2.offset_sync_store import SYNCS_PER_PARTITION, OffsetSyncStore, SyncIndex
from mirrorbook.mm2.records import OffsetSync

TPX = TP("topic1", 2)


def sync(store: OffsetSyncStore, up: int, down: int) -> None:
    store.handle(OffsetSync(TPX.topic, TPX.partition, up, down))


def started() -> OffsetSyncStore:
    store = OffsetSyncStore()
    store.start()
    return store


def test_offset_translation_vectors():
    store = started()
    sync(store, 100, 200)
    assert store.translate_downstream(TPX, 150) == 201  # no dead reckoning: only one past the sync
    sync(store, 150, 251)
    assert store.translate_downstream(TPX, 150) == 251  # exact
    assert store.translate_downstream(TPX, 5) == -1     # older than every sync
    sync(store, 200, 10)                                # downstream reset
    assert store.translate_downstream(TPX, 200) == 10
    sync(store, 20, 20)                                 # upstream reset clears history
    assert store.translate_downstream(TPX, 20) == 20


def test_no_translation_before_start_or_without_syncs():
    store = OffsetSyncStore()
    assert store.translate_downstream(TPX, 0) is None
    sync(store, 100, 200)
    assert [store.translate_downstream(TPX, o) for o in (0, 100, 200)] == [None, None, None]
    store.start()
    assert [store.translate_downstream(TPX, o) for o in (0, 100, 200)] == [-1, 200, 201]
    assert started().translate_downstream(TPX, 0) is None


def assert_sparse_invariant(store: OffsetSyncStore) -> None:
    for j in range(SYNCS_PER_PARTITION):
        for i in range(j + 1):
            ju, iu = store.sync_for(TPX, j).upstream_offset, store.sync_for(TPX, i).upstream_offset
            if ju == iu:
                continue
            lower = ju + (1 << max(i - 2, 0))
            assert lower <= iu, f"invariant C({i},{j})"
            upper = ju + (1 << j) - (1 << i)
            assert upper >= 2**63 or iu <= upper, f"invariant B({i},{j})"


def assert_sparse_sync(store: OffsetSyncStore, sync_offset: int, previous: int) -> None:
    t = store.translate_downstream
    assert t(TPX, sync_offset - 1) == (-1 if previous == -1 else previous + 1)
    assert t(TPX, sync_offset) == sync_offset
    assert t(TPX, sync_offset + 1) == sync_offset + 1
    assert t(TPX, sync_offset + 2) == sync_offset + 1


def test_past_offset_translation():
    store = OffsetSyncStore()
    offset = 0
    while offset <= 1000:
        sync(store, offset, offset)
        offset += 10
    assert_sparse_invariant(store)
    store.start()
    assert_sparse_sync(store, 1000, -1)  # only the newest sync of the initial read survives
    while offset <= 10000:
        sync(store, offset, offset)
        if offset % 70 == 0:  # Kafka checks after every sync; every 7th keeps this test fast
            assert_sparse_invariant(store)
        offset += 10
    assert_sparse_sync(store, 1000, -1)  # invariant D: the oldest usable sync is kept
    for at, prev in [(4840, 1000), (6760, 4840), (8680, 6760), (9160, 8680), (9640, 9160), (9880, 9640),
                     (9940, 9880), (9970, 9940), (9990, 9970), (10000, 9990)]:
        assert_sparse_sync(store, at, prev)
    sync(store, 1500, 11000)  # upstream rewind clears history
    assert_sparse_invariant(store)
    assert store.translate_downstream(TPX, 1499) == -1
    assert store.translate_downstream(TPX, 1500) == 11000
    assert store.translate_downstream(TPX, 2000) == 11001


def test_keep_most_distinct_syncs():
    # Kafka runs 1e6 offsets per step; a shorter run exercises the same buckets in Python's time budget.
    iterations = 20_000
    step, steps = 1, 0
    while step < 2**63 // iterations and step < 4000:
        store = started()
        last = 1
        for offset in range(0, iterations + 1, step):
            sync(store, offset, offset)
            assert store.sync_for(TPX, 0).upstream_offset == offset  # invariant A
            assert store.sync_for(TPX, 63).upstream_offset == 0      # invariant D
            count = len(store.stored(TPX))
            assert count - last >= -1, f"expired too many syncs at {offset} (step {step})"
            last = count
        step = (step << 1) + 1
        steps += 1
    assert steps == 11  # step 1, 3, 7, ... 2047


def test_matches_mm2_4_3_1_checkpoints_observed_on_the_devstack():
    # Syncs MM2 wrote for a 500-record partition (offset.lag.max=100) and the checkpoints it emitted.
    store = started()
    for u in (0, 101, 202, 303, 404, 499):
        sync(store, u, u)
    assert [s.upstream_offset for s in store.stored(TPX)] == [499, 404, 202, 0]
    assert store.translate_downstream(TPX, 350) == 203
    assert store.translate_downstream(TPX, 123) == 1
    assert store.translate_downstream(TPX, 500) == 500


def test_initial_read_without_must_read_to_end_keeps_history():
    syncs = [OffsetSync(TPX.topic, TPX.partition, u, u) for u in (0, 101, 202)]
    assert OffsetSyncStore().start(syncs).translate_downstream(TPX, 150) == -1
    assert OffsetSyncStore().start(syncs, initialization_must_read_to_end=False).translate_downstream(TPX, 150) == 102


def s(u: int, d: int) -> OffsetSync:
    return OffsetSync("t", 0, u, d)


def test_sync_window_brackets_the_offset():
    idx = SyncIndex([s(0, 0), s(101, 101), s(202, 205)])
    w = idx.window(150)
    assert (w.below, w.above) == (s(101, 101), s(202, 205))
    assert w.source_range(1000) == (101, 203) and w.target_range(1000) == (101, 206)
    w = idx.window(101)
    assert w.below == s(101, 101)
    end = idx.window(300)
    assert end.above is None and end.source_range(310) == (202, 310) and end.target_range(320) == (205, 320)
    assert SyncIndex([]).window(5).below is None
    assert SyncIndex([s(10, 10)]).window(5).source_range(100) is None


def test_sync_window_uses_the_newest_generation_only():
    # A rewind (upstream or downstream going back, or a re-sent record) starts a new generation.
    assert SyncIndex([s(0, 0), s(100, 100), s(50, 200), s(80, 230)]).syncs == [s(50, 200), s(80, 230)]
    assert SyncIndex([s(0, 0), s(100, 100), s(150, 20)]).syncs == [s(150, 20)]
    assert SyncIndex([s(0, 0), s(100, 100), s(100, 140)]).syncs == [s(100, 140)]
    assert SyncIndex([s(0, 0), s(100, 100), s(100, 100)]).syncs == [s(0, 0), s(100, 100)]  # duplicate
