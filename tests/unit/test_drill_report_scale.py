"""The DR drill report at a thousand groups (issue #13 item 6), as a person sees it: rendered by headless Chromium
(tests/e2e/browser.py, no Airflow needed: the report is a file), the figures and the groups' table above the fold,
the groups that skipped on top, each group's partitions folded away, and the page's table rows bounded — not
149,100. The screenshot is kept under $MIRRORBOOK_TEST_ARTIFACTS (else the test's tmp dir), its path printed.

Property tests: the groups' totals are their partitions' sums, the detail is each listed group's partitions to
look at first, and no drill of any size renders more table rows than the page's limits allow."""

from __future__ import annotations

import os
import random
import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorbook.reports import drill_report
from mirrorbook.reports.drill_report import PartitionOutcome, group_outcomes, render_html, write_report
from tests.e2e.browser import chromium, page, real_png
from tests.unit.test_drill_report import _summary

TOPICS = {"orders": 50, "payments": 50, "events": 49}  # 149 partitions a group; the first 100 also on "audit"
SKIPPING = {"g0733", "g0101", "g0420"}  # groups that skipped on a partition (they must be on top)


def _partitions(groups: int, seed: int = 6) -> list[PartitionOutcome]:
    rnd = random.Random(seed)
    tps = [(t, p) for t, n in TOPICS.items() for p in range(n)]
    return [_outcome(rnd, f"g{g:04d}", topic, p)
            for g in range(groups) for topic, p in tps + ([("audit", 0)] if g < 100 else [])]


def _outcome(rnd: random.Random, group: str, topic: str, partition: int) -> PartitionOutcome:
    """3% of partitions re-read a few records; the SKIPPING groups skip 2 on partition 7 of each topic."""
    a_next = rnd.randrange(1_000, 90_000)
    re_read = rnd.randrange(1, 40) if rnd.random() < 0.03 else 0
    skipped = 2 if group in SKIPPING and partition == 7 else 0
    return PartitionOutcome(group=group, source_topic=topic, target_topic=f"A.{topic}", partition=partition,
                            a_next=a_next, a_high=a_next + 50, b_offset=a_next - re_read + skipped,
                            b_first_seq=a_next - re_read + skipped, read_on_b=50 + re_read - skipped,
                            re_read=re_read, skipped=skipped)


def _shots(tmp_path: Path) -> Path:
    return Path(os.environ.get("MIRRORBOOK_TEST_ARTIFACTS") or tmp_path)


def _table_rows(limit_groups: int, detail: int) -> int:
    """The most table rows the page may hold: the groups' table (header, groups, the "more" line), each listed
    group's partitions (header, rows), the facts and the steps of `_summary`."""
    facts, steps = 13, 2
    return 2 + limit_groups + detail * (1 + drill_report.DETAIL_ROWS) + facts + steps


def test_a_thousand_groups_drill_report_leads_with_its_summary_and_stays_a_bounded_page(tmp_path: Path):
    assert chromium(), "chromium is missing: run scripts/bootstrap.sh --test (installs Debian's chromium)"
    parts = _partitions(1000)
    assert len(parts) == 149_100
    summary = _summary(groups=sorted({p.group for p in parts}), partitions=parts, ok=False, skipped=6,
                       problems=[f"{g}: 2 record(s) skipped on orders-7" for g in sorted(SKIPPING)])
    html_path, json_path = write_report(summary, tmp_path, "drill-g1000")
    shot = _shots(tmp_path) / "drill-report-g1000.png"

    with page([]) as tab:
        tab.navigate(html_path.as_uri())
        seen = tab.evaluate("""(() => {
            const box = s => document.querySelector(s).getBoundingClientRect();
            const groups = [...document.querySelectorAll('#groups tbody tr')];
            return {fold: window.innerHeight, figures: box('.figures').bottom, h1: box('h1').top,
                    first_groups: groups.slice(0, 3).map(
                        r => [r.cells[0].textContent, r.getBoundingClientRect().bottom]),
                    group_rows: groups.length, more: groups[groups.length - 1].textContent,
                    rows: document.querySelectorAll('tr').length,
                    details: document.querySelectorAll('details').length,
                    open: [...document.querySelectorAll('details[open] summary b')].map(b => b.textContent),
                    folded: [...document.querySelectorAll('details:not([open])')].map(
                        d => [d.getBoundingClientRect().height, d.querySelector('table').checkVisibility()]),
                    bars: document.querySelectorAll('svg text[text-anchor="end"]').length,
                    height: document.documentElement.scrollHeight};
        })()""")
        tab.screenshot(shot)
    print(f"drill report at 1,000 groups: {html_path} ({html_path.stat().st_size:,} bytes); screenshot: {shot}")

    real_png(shot)
    # The summary is on the first screen: the figures, then the groups to look at first — the ones that skipped.
    assert 0 <= seen["h1"] < seen["figures"] <= seen["fold"]
    assert {name for name, _ in seen["first_groups"]} == SKIPPING
    assert all(bottom <= seen["fold"] for _, bottom in seen["first_groups"]), seen
    # Bounded: the first groups listed, then how many more; the first groups' partitions, those that skipped open.
    assert seen["group_rows"] == drill_report.LISTED_GROUPS + 1
    assert f"… and {1000 - drill_report.LISTED_GROUPS} more group(s)" in seen["more"]
    assert seen["details"] == drill_report.DETAIL_GROUPS and sorted(seen["open"]) == sorted(SKIPPING)
    # A folded group is one line: its partitions are not shown and take no room.
    assert len(seen["folded"]) == drill_report.DETAIL_GROUPS - len(SKIPPING)
    assert all(height < 40 and not visible for height, visible in seen["folded"]), seen["folded"]
    assert seen["rows"] <= _table_rows(drill_report.LISTED_GROUPS, drill_report.DETAIL_GROUPS) < 3_000
    assert seen["bars"] <= drill_report.CHART_BARS * 2 and seen["height"] < 12_000
    assert html_path.stat().st_size < 2_000_000
    assert len(drill_report.load_summary(json_path).partitions) == 149_100  # the data keeps every partition


partitions = st.builds(PartitionOutcome, group=st.integers(0, 150).map(lambda g: f"g{g}"),
                       source_topic=st.sampled_from(["t", "u"]), target_topic=st.just("A.t"),
                       partition=st.integers(0, 200), a_next=st.integers(0, 10**6), a_high=st.integers(0, 10**6),
                       b_offset=st.one_of(st.none(), st.integers(0, 10**6)), read_on_b=st.integers(0, 100),
                       re_read=st.integers(0, 100), skipped=st.integers(0, 3), duplicates=st.integers(0, 2))


@settings(max_examples=60, deadline=None)
@given(parts=st.lists(partitions, max_size=400), detail_groups=st.integers(0, 30), detail_rows=st.integers(1, 5))
def test_each_groups_totals_are_its_partitions_and_its_detail_the_partitions_to_look_at_first(parts, detail_groups,
                                                                                              detail_rows):
    groups = group_outcomes(parts, detail_groups, detail_rows)
    assert sorted(g.group for g in groups) == sorted({p.group for p in parts})
    for i, g in enumerate(groups):
        mine = [p for p in parts if p.group == g.group]
        assert (g.partitions, g.skipped, g.re_read, g.unwritten) == (
            len(mine), sum(p.skipped for p in mine), sum(p.re_read for p in mine),
            sum(p.b_offset is None for p in mine))
        shown = g.partitions_shown
        assert len(shown) == (min(detail_rows, len(mine)) if i < detail_groups else 0)
        assert all(p in mine for p in shown)
        left = [p for p in mine if not any(p is q for q in shown)]
        if shown and left:  # none left out skipped more than one shown
            assert max(p.skipped for p in left) <= min(p.skipped for p in shown)
    assert [g.skipped for g in groups] == sorted((g.skipped for g in groups), reverse=True)


@settings(max_examples=25, deadline=None)
@given(parts=st.lists(partitions, max_size=600))
def test_no_drill_renders_more_table_rows_than_the_pages_limits(parts):
    html = render_html(_summary(partitions=parts), "d.json")
    groups = len({p.group for p in parts})
    rows = len(re.findall(r"<tr[ >]", html))
    assert rows <= _table_rows(min(groups, drill_report.LISTED_GROUPS), min(groups, drill_report.DETAIL_GROUPS))
    assert html.count("<details") == min(groups, drill_report.DETAIL_GROUPS)
