"""A move's report at a thousand groups (issue #13 item 6): the file leads with the summary — the run's figures,
then one entry per group, the groups to look at first on top — and keeps the group-partitions last, column by
column; the report task's XCom is the summary with every list cut to its first few items.

Property tests: the rows read back from the file are the plan's rows (what the DAG tests read as
`run.report()["rows"]`); the groups' totals add up to the plan's; no list in the XCom is longer than
`XCOM_LISTED`, and each cut one says how long it was."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorbook.audit import AuditStore
from mirrorbook.mm2.counts import Count, total
from mirrorbook.runbooks import move_report
from mirrorbook.core.engine import RunInfo, Runbook
from mirrorbook.runbooks.plan import PlanRow, TranslationPlan, group_totals
from tests.unit.test_plan_storage import plans


def _report(tmp: Path, plan: TranslationPlan, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    rb = Runbook(RunInfo(run_id="r"), AuditStore(f"sqlite:///{tmp}/audit.db"), dry_run=True)
    return move_report.move_report(rb, plan, None, extra)


@settings(max_examples=40, deadline=None)
@given(plan=plans, listed=st.integers(0, 50))
def test_the_report_file_reads_back_the_plans_rows_after_its_summary(tmp_path_factory, plan, listed):
    tmp = tmp_path_factory.mktemp("report")
    report = _report(tmp, plan)
    path = tmp / "failover-r.json"
    path.write_text(move_report.report_json(report))
    text = path.read_text()
    assert text.index('"plan"') < text.index('"groups"') < text.index('"rows"')  # the summary first
    back = move_report.read_report(path)
    assert back["rows"] == [json.loads(r.model_dump_json()) for r in plan.rows]
    assert {k: v for k, v in back.items() if k != "rows"} == json.loads(json.dumps(
        {k: v for k, v in report.items() if k != "rows"}, default=str))
    assert move_report.report_rows(json.loads(text), listed) == plan.rows[:listed]
    assert move_report.report_rows(back, listed) == plan.rows[:listed]  # a report kept one dict per row


@settings(max_examples=60, deadline=None)
@given(plan=plans)
def test_the_groups_totals_add_up_to_the_plans(plan):
    groups = group_totals(plan.rows)
    whole = plan.totals()
    assert sorted(g.group for g in groups) == sorted({r.group for r in plan.rows})
    assert sum(g.partitions for g in groups) == whole["partitions"]
    assert sum(g.bounded for g in groups) == whole["bounded"]
    assert total(Count.kept(g.re_read, g.re_read_max) for g in groups) == Count.kept(whole["re_read"],
                                                                                     whole["re_read_max"])
    assert total(Count.kept(g.skipped, g.skipped_max) for g in groups) == Count.kept(whole["skipped"],
                                                                                     whole["skipped_max"])
    methods: dict[str, int] = {}
    for g in groups:
        for m, n in g.methods.items():
            methods[m] = methods.get(m, 0) + n
    assert methods == whole["methods"]
    assert sum(g.noted for g in groups) == sum(r.note is not None for r in plan.rows)


def _row(group: str, partition: int, re_read: Count = Count.exact(0), skip: Count = Count.exact(0),
         note: str | None = None) -> PlanRow:
    return PlanRow(group=group, source_topic="t", target_topic="A.t", partition=partition, source_offset=10,
                   offset=10, method="precise:exact", re_read=re_read, skip=skip, note=note)


def test_the_groups_to_look_at_come_first():
    rows = [_row("a-quiet", 0), _row("b-re-reads-little", 0, re_read=Count.exact(3)),
            _row("c-re-reads-most", 0, re_read=Count.between(0, 500)), _row("d-noted", 0, note="mm2 checkpoint"),
            _row("e-skips", 0, skip=Count.exact(4)), _row("f-skips-uncounted", 0, skip=Count.between(0, None)),
            _row("e-skips", 1, skip=Count.exact(1))]
    assert [g.group for g in group_totals(rows)] == ["f-skips-uncounted", "e-skips", "d-noted", "c-re-reads-most",
                                                     "b-re-reads-little", "a-quiet"]
    assert group_totals(rows)[1].model_dump(include={"partitions", "skipped", "skipped_max"}) == {
        "partitions": 2, "skipped": 5, "skipped_max": 5}
    assert group_totals(rows)[2].note == "mm2 checkpoint" and group_totals(rows)[2].noted == 1


json_values = st.recursive(st.one_of(st.none(), st.integers(), st.text(max_size=5)),
                           lambda inner: st.one_of(st.lists(inner, max_size=25),
                                                   st.dictionaries(st.text("abc", max_size=3), inner, max_size=4)),
                           max_leaves=200)


def _lists(value: Any) -> list[list[Any]]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _lists(v)]
    if isinstance(value, list):
        return [value, *(x for v in value for x in _lists(v))]
    return []


@settings(max_examples=200, deadline=None)
@given(report=st.dictionaries(st.sampled_from(["plan", "proof", "planned_calls", "so_far", "rows", "notes"]),
                              json_values))
def test_no_list_in_the_xcom_is_longer_than_listed_and_each_cut_one_says_its_length(report):
    xcom = move_report.for_xcom(report, "/reports/failover-r.json")
    assert "rows" not in xcom and xcom["report_path"] == "/reports/failover-r.json"
    assert all(len(x) <= move_report.XCOM_LISTED for x in _lists(xcom))

    def check(whole: Any, cut: Any) -> None:
        if isinstance(whole, dict):
            for k, v in whole.items():
                check(v, cut[k])
                if isinstance(v, list) and len(v) > move_report.XCOM_LISTED:
                    assert cut[f"{k}_count"] == len(v)
        elif isinstance(whole, list):
            assert len(cut) == min(len(whole), move_report.XCOM_LISTED)
            for w, c in zip(whole, cut):
                check(w, c)
        else:
            assert cut == whole

    check({k: v for k, v in report.items() if k != "rows"}, xcom)


def test_a_thousand_groups_report_keeps_a_small_xcom(tmp_path):
    rows = [_row(f"g{g:04d}", p, re_read=Count.exact(p % 3)) for g in range(1000) for p in range(3)]
    plan = TranslationPlan(flow="A->B", direction="failover", mode="planned", translation="precise",
                           from_cluster="A", to_cluster="B", groups=sorted({r.group for r in rows}), rows=rows)
    calls = [{"method": "AlterConsumerGroupOffsets", "path": f"kafka://B/groups/g{g:04d}",
              "body": {"partitions": 3, "offsets": {"A.t-0": 10}}, "precondition": "idle"} for g in range(1000)]
    report = _report(tmp_path, plan, {"planned_calls": calls})
    xcom = move_report.for_xcom(report, tmp_path / "r.json")
    assert len(json.dumps(xcom, default=str)) < 10_000 < len(json.dumps(report, default=str)) / 10
    assert xcom["planned_calls_count"] == 1000 and xcom["groups_count"] == 1000
    assert xcom["plan"]["partitions"] == 3000  # the totals whole
