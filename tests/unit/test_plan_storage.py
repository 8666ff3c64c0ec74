"""How a run keeps its translation plan (issue #13 item 4): one list per field, text as indexes into one table,
so a thousand groups' plan is stored and read back in a fraction of a second — and read back exactly.

The property test draws plans of every shape a row can take (counts exact, bounded or unbounded; fields
absent; text with anything in it) and checks that the plan read back from the audit store equals the plan
written, and that the offsets alone (what writing and reading back need) are the plan's."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorbook.audit import AuditStore
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.counts import Count
from mirrorbook.runbooks.plan import (COLUMNS_FORMAT, PlannedOffsets, PlanRow, RowView, TranslationPlan, _COUNT_COLUMNS,
                                      _NUMBER_COLUMNS, _TEXT_COLUMNS)

offsets = st.integers(min_value=0, max_value=2**62)
# Text the audit store keeps as it is (it escapes NUL and lone surrogates, in every format alike).
text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30)
counts = st.one_of(offsets.map(Count.exact),
                   st.tuples(offsets, st.one_of(st.none(), offsets)).map(lambda lh: Count.between(*lh)))
rows = st.builds(PlanRow, group=st.sampled_from(["g1", "g2", "ü-g"]), source_topic=text,
                 target_topic=st.sampled_from(["A.t", "A.u", "t"]), partition=st.integers(0, 1000),
                 source_offset=st.one_of(st.none(), offsets), offset=offsets, method=text,
                 mm2_offset=st.one_of(st.none(), offsets), precise_offset=st.one_of(st.none(), offsets),
                 re_read=counts, skip=counts, basis_age_s=st.one_of(st.none(), st.floats(0, 1e9)),
                 note=st.one_of(st.none(), text))
plans = st.builds(TranslationPlan, flow=st.just("A->B"), direction=st.sampled_from(["failover", "failback"]),
                  mode=st.sampled_from(["planned", "unplanned"]), translation=st.sampled_from(["precise", "mm2"]),
                  from_cluster=st.just("A"), to_cluster=st.just("B"),
                  groups=st.lists(st.sampled_from(["g1", "g2", "g3"]), unique=True), rows=st.lists(rows, max_size=40),
                  notes=st.lists(text, max_size=3))


def test_every_field_of_a_row_is_stored():
    assert set(PlanRow.model_fields) == {*_TEXT_COLUMNS, *_NUMBER_COLUMNS, *_COUNT_COLUMNS}


@settings(max_examples=40, deadline=None)
@given(plan=plans)
def test_a_plan_reads_back_as_it_was_written(tmp_path_factory, plan):
    store = AuditStore(f"sqlite:///{tmp_path_factory.mktemp('plan')}/audit.db")
    store.progress_set("run", "plan", plan.stored())
    kept = store.progress_get("run", "plan")
    assert TranslationPlan.from_stored(kept) == plan
    assert PlannedOffsets.from_stored(kept).offsets() == plan.offsets()
    assert store.progress_has("run", "plan") and not store.progress_has("run", "other")


def test_a_plan_kept_one_object_per_row_still_reads_back():
    """A run planned before this release kept `model_dump` of the plan: it is read as it was."""
    plan = TranslationPlan(flow="A->B", direction="failover", mode="planned", translation="precise",
                           from_cluster="A", to_cluster="B", groups=["g"],
                           rows=[PlanRow(group="g", source_topic="t", target_topic="A.t", partition=0,
                                         source_offset=5, offset=7, method="precise:aligned")])
    old = plan.model_dump(mode="json")
    assert TranslationPlan.from_stored(old) == plan
    assert PlannedOffsets.from_stored(old).offsets() == {"g": {TP("A.t", 0): 7}}


@settings(max_examples=20, deadline=None)
@given(plan=plans)
def test_a_plan_kept_one_list_per_column_still_reads_back(plan):
    """A run planned by the release that kept each column as a JSON list (format 2) reads as it was."""
    old = {"format": COLUMNS_FORMAT, **plan.model_dump(mode="json", exclude={"rows"}), **plan.columns()}
    assert TranslationPlan.from_stored(old) == plan
    assert PlannedOffsets.from_stored(old).offsets() == plan.offsets()


@given(plan=plans)
def test_a_plans_views_are_its_rows_positions_read_from_the_columns_it_was_stored_as(plan):
    """What the proofs read of a kept plan (no object per row) is, row for row, what its rows say."""
    kept = TranslationPlan.from_stored(plan.stored(), rows=False)
    assert [tuple(getattr(r, f) for f in RowView._fields) + (r.target_tp,) for r in plan.rows] == \
        [(*v, v.target_tp) for v in kept.views()]
