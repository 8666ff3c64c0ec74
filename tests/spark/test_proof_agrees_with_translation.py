"""The record proof and precise translation, side by side: two codes that place a group by the same rules.

Precise translation (mirrorbook.mm2.precise, in the runbook) proves where each group resumes from offset syncs and
chains of records; the record proof (spark_apps/record_parity.py, on Spark) judges a position from every record of
both sides, with no sync and no plan. On synthetic partitions MM2 copied as it does (tests/unit/
test_precise_alignment.py's scenes: transactions, retention on either side, MM2 starting late, syncs lost or
compacted away, every proof rule including the ones with no anchor below; MM2 drained), every position translation
proves must be one the record proof judges OK — the copy of the record the group reads next, nothing re-read or
skipped — and, where no aborted record lies between, the very offset the record proof finds. A position one past
it must be judged as skipping: the check can fail.

The proof places records and boundaries two ways — one Python pass per pair (`--placement arrow`, the default) and
Spark SQL window sorts (`sql`, for executors without pyarrow) — and both must give the same tables, row for row,
on any scene: MM2 re-sending, and a copy with records swapped (ORDER), dropped (MISSING), foreign or doubled
(EXTRA), with boundaries anywhere on the target, missing, or outside what was read.

The proof runs its own pipeline (`proof_tables`, what the app runs after reading Kafka) on the session's Spark
Connect server; only the readers differ: they hand it the scenes' logs instead of reading a cluster.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from mirrorbook.parity import connect, submit
from tests.unit.test_precise_alignment import ABORTED, MARKER, RECORD, Scene, read, scenes

pytestmark = pytest.mark.spark
app = connect.load_app(submit.apps_dir() / "record_parity.py")
SCENES_PER_JOB = 32
SOURCE, TARGET = "s", "t"  # scene i is partition i of each


@st.composite
def comparable_scenes(draw) -> Scene:
    """Scenes both codes claim to handle. Translation reads the source as MM2 does (the runbook's default); MM2
    never re-sends (a re-send is an EXTRA record to the record proof: it fails the pair, by design) and has copied
    everything, as the failover's drain gate makes sure before either runs (undrained, the next record's copy may not
    exist yet: translation then proves no record's position, but may prove an aborted record's just before it, which
    the record proof, never counting aborted records, cannot confirm). Equal records stay only where both logs hold
    the same stretch from the start: elsewhere (retention, a late start, aborted records) matching by occurrence
    cannot tell the copies apart, and both codes state that residual."""
    scene = draw(scenes(restarts=False))
    view = scene.mm2_view()
    if scene.sends:  # drained: the rest copied, its offset syncs not (yet) written
        scene.sends = scene.sends + view[view.index(scene.sends[-1]) + 1:]
    scene.reader_sees_aborted = scene.copies_aborted
    whole = scene.s_low == 0 == scene.t_low and scene.sends[:1] == scene.mm2_view()[:1] and ABORTED not in scene.kinds
    if not scene.unique_content and not whole:
        scene.contents = {o: (b"k", b"u%d" % o, (), 1000 + o) for o in scene.contents}
        scene.unique_content = True
    return scene


class SceneReader(app.Reader):
    """One side of the scenes' logs as a reader gives them: every record still there (aborted ones too, as the
    Kafka source reads read_uncommitted), hashed as the batched reader hashes; `offsets` is the committed view."""

    def __init__(self, spark: Any, scenes: list[Scene], side: str) -> None:
        self.spark, self.scenes, self.side = spark, scenes, side

    def _log(self, i: int, scene: Scene) -> list[tuple[int, tuple]]:
        if self.side == SOURCE:
            return [(o, scene.contents[o]) for o, k in enumerate(scene.kinds) if o >= scene.s_low and k != MARKER]
        # a negative send is a record MM2 never copied: foreign to the source
        return [(t, scene.contents[u] if u >= 0 else (b"f", b"foreign%d" % -u, (), 7))
                for t, u in enumerate(scene.sends) if t >= scene.t_low]

    def records(self, plan: Any) -> Any:
        rows = [(self.side, i, o, app.content_digest(k, v, list(h), ts), k)
                for i, scene in enumerate(self.scenes) for o, (k, v, h, ts) in self._log(i, scene)]
        return app.identified(self.spark.createDataFrame(rows, app.READ_SCHEMA))

    def offsets(self, plan: Any) -> Any:
        rows = [(self.side, i, o) for i, scene in enumerate(self.scenes)
                for o, k in enumerate(scene.kinds) if o >= scene.s_low and k == RECORD]
        return self.spark.createDataFrame(rows, "topic string, partition int, offset long")


def proved(spark: Any, scenes: list[Scene], boundaries: list[dict[str, Any]], placement: str = "arrow",
           max_reread: int | None = None) -> dict[str, list[dict[str, Any]]]:
    """The record proof's tables (pairs, differences, boundaries), the scenes as its two clusters."""
    pairs = [{"source_topic": SOURCE, "source_partition": i, "source_start": s.s_low, "source_end": s.s_high,
              "target_topic": TARGET, "target_partition": i, "target_start": s.t_low, "target_end": s.t_high,
              "source_stable_end": s.s_high if ABORTED in s.kinds else None, "pair_no": i}
             for i, s in enumerate(scenes)]
    readers = {"source": SceneReader(spark, scenes, SOURCE), "target": SceneReader(spark, scenes, TARGET)}
    frame = spark.createDataFrame(boundaries, app.pc.BOUNDARIES)
    args = argparse.Namespace(checksums_only=False, max_reread=max_reread, placement=placement)
    return {name: rows for name, (rows, _) in app.proof_tables(spark, args, pairs, readers, frame).items()}


def judged(spark: Any, scenes: list[Scene], boundaries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The record proof's verdict per boundary group."""
    return {b["group"]: b for b in proved(spark, scenes, boundaries)["boundaries"]}


def boundary(i: int, group: str, committed: int, offset: int | None) -> dict[str, Any]:
    return {"group": group, "source_topic": SOURCE, "source_partition": i, "source_committed": committed,
            "target_topic": TARGET, "target_partition": i, "target_offset": offset, "plan_offset": offset}


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.lists(comparable_scenes(), min_size=SCENES_PER_JOB, max_size=SCENES_PER_JOB))
def test_every_position_translation_proves_is_the_one_the_record_proof_finds(spark: Any, batch: list[Scene]):
    proven: dict[str, tuple[int, Scene, int, int]] = {}  # group -> (scene, scene, C, P)
    shifted: dict[str, str] = {}                        # group one past P -> the proven group
    boundaries = []
    for i, scene in enumerate(batch):
        alignment, _, _ = read(scene)
        for c in scene.committed:
            proof = alignment.position(c)
            if not proof.proven:
                continue
            event(f"rule {proof.rule}")
            group = f"g{i}-{c}"
            proven[group] = (i, scene, c, proof.offset)
            boundaries.append(boundary(i, group, c, proof.offset))
            at = proof.offset
            if at < scene.t_high and scene.kinds[scene.sends[at]] == RECORD:  # P holds a record the group reads
                shifted[f"{group}+1"] = group
                boundaries.append(boundary(i, f"{group}+1", c, at + 1))
    if not boundaries:
        return
    verdicts = judged(spark, batch, boundaries)
    for group, (i, scene, c, at) in proven.items():
        v = verdicts[group]
        assert (v["status"], v["n"], v["exact"]) == ("OK", 0, True), (group, at, v, scene)
        # The offset the record proof finds: the next record's copy, or the target's end when the group read every
        # record. Translation reads aborted records as MM2 does, so its P may be the copy of one just before.
        found = scene.t_high if v["true_offset"] is None else v["true_offset"]
        assert at <= found and all(scene.kinds[scene.sends[t]] == ABORTED for t in range(at, found)), \
            (group, at, v, scene)
    for group, of in shifted.items():
        assert verdicts[group]["status"] == "SKIP", (group, verdicts[group], proven[of][1])


@st.composite
def faulty_scenes(draw) -> Scene:
    """Any scene (re-sends, duplicates, views that differ), its copy then damaged a few times."""
    scene = draw(scenes())
    sends = list(scene.sends)
    for _ in range(draw(st.integers(0, 3))):
        if not sends:
            break
        k = draw(st.integers(0, len(sends) - 1))
        fault = draw(st.sampled_from(["swap", "drop", "foreign", "again"]))
        if fault == "swap" and k + 1 < len(sends):
            sends[k], sends[k + 1] = sends[k + 1], sends[k]
        elif fault == "drop":
            del sends[k]
        elif fault == "foreign":
            sends.insert(k, -1 - k)
        else:
            sends.insert(k, sends[k])
    scene.sends, scene.t_low = sends, min(scene.t_low, len(sends))
    return scene


@st.composite
def batches_with_boundaries(draw) -> tuple[list[Scene], list[dict[str, Any]]]:
    batch = draw(st.lists(faulty_scenes(), min_size=SCENES_PER_JOB, max_size=SCENES_PER_JOB))
    boundaries = []
    for i, scene in enumerate(batch):
        for k, c in enumerate(scene.committed):
            at = draw(st.none() | st.integers(max(0, scene.t_low - 2), scene.t_high + 2))
            boundaries.append(boundary(i, f"g{i}-{k}", c, at) | {"plan_offset": draw(st.none() | st.just(at))})
    return batch, boundaries


def _rows(tables: dict[str, list[dict[str, Any]]]) -> dict[str, list[str]]:
    return {name: sorted(json.dumps(r, sort_keys=True) for r in rows) for name, rows in tables.items()}


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                 HealthCheck.function_scoped_fixture])
@given(batches_with_boundaries(), st.sampled_from([None, 0, 2]))
def test_both_placements_give_the_same_tables_on_any_copy(spark: Any, batch_and_boundaries, max_reread):
    batch, boundaries = batch_and_boundaries
    arrow = proved(spark, batch, boundaries, "arrow", max_reread)
    for name, rows in arrow.items():
        for r in rows:
            event(f"{name} {r.get('status') or r.get('kind') or ('failed' if r.get('failed') else 'passed')}")
    assert _rows(arrow) == _rows(proved(spark, batch, boundaries, "sql", max_reread))
