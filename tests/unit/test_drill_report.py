"""The drill's pure parts: the seq proof, its names, the SVG charts and the HTML/JSON report."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from mirrorbook.audit import Artifact
from mirrorbook.cli.drill import DrillNotFound, report_html
from mirrorbook.reports.drill_report import (DrillSummary, LagBeforeCutover, LagPoint, PartitionOutcome, StepTiming,
                                             load_summary, render_html, write_report)
from mirrorbook.reports.svg import Bar, Marker, Series, bar_chart, line_chart, nice_ticks, timeline
from mirrorbook.runbooks.drill import DrillParams, prove
from mirrorbook.runbooks.params import parse
from mirrorbook.topology import ConnectClusterSpec, FlowSpec, KafkaClusterSpec, Topology

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
TOPOLOGY = Topology(clusters={"A": KafkaClusterSpec(connection_id="a"), "B": KafkaClusterSpec(connection_id="b")},
                    connect_clusters={"B": ConnectClusterSpec(connection_id="c")},
                    flows=[FlowSpec(source="A", target="B", connect_cluster="B")])


@pytest.mark.parametrize("a_next,a_high,seqs,expect", [
    (10, 15, [10, 11, 12, 13, 14], (0, 0, 0)),   # resumed at exactly the next record
    (10, 15, [8, 9, 10, 11, 12, 13, 14], (2, 0, 0)),  # two records read again
    (10, 15, [12, 13, 14], (0, 2, 0)),           # 10 and 11 never read: skipped
    (10, 15, [10, 11, 11, 12, 13, 14], (0, 0, 1)),  # a replication duplicate
    (15, 15, [], (0, 0, 0)),                     # the group was at the end
    (10, 15, [10, 11, 13, 14], (0, 1, 0)),       # a gap in the middle is a skip too
])
def test_prove_counts_re_reads_skips_and_duplicates_by_seq(a_next, a_high, seqs, expect):
    assert prove(a_next, a_high, seqs) == expect


def test_names_derive_from_the_run_id_and_the_move_takes_only_this_runs_groups():
    p = parse(DrillParams, {"flow": "A->B", "groups": 3, "topics": 2, "rate": 50.5}, TOPOLOGY)
    assert p.canary_topics() == ["mirrorbook-drill-t0", "mirrorbook-drill-t1"]
    groups = p.canary_groups("manual__2026-01-01")
    assert groups == p.canary_groups("manual__2026-01-01") and len(set(groups)) == 3
    assert not set(groups) & set(p.canary_groups("manual__2026-01-02"))
    move = p.move("manual__2026-01-01", TOPOLOGY)
    assert move.planned and move.from_cluster == "A" and move.to_cluster == "B"
    assert all(re.fullmatch(move.regex, g) for g in groups)
    assert not any(re.fullmatch(move.regex, g) for g in p.canary_groups("manual__2026-01-02"))
    assert p.steady_lag == 51  # one second of production


def test_charts_are_well_formed_svg_with_escaped_text():
    charts = [
        line_chart([Series("lag <of> A&B", [(0, 1), (2.5, 40), (5, 0)])], markers=[Marker(2.5, "cut<over>")],
                   title="t&1", x_label="s", y_label="records"),
        line_chart([], title="empty", x_label="s", y_label="r"),
        bar_chart([Bar("g<1> t-0", [10, None], ["re-read 0"]), Bar("g2 t-0", [7, 7])], ["A", "B"], title="bars"),
        timeline([("step <a>", 0.0, 1.5, "ok"), ("step b", 1.5, 1.6, "error")], title="steps"),
    ]
    for svg in charts:
        root = ET.fromstring(svg)
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert "lag &lt;of&gt; A&amp;B" in charts[0] and "cut&lt;over&gt;" in charts[0]
    assert nice_ticks(0, 87) == [0, 20, 40, 60, 80, 100]


def _summary(**kw) -> DrillSummary:
    base = dict(run_id="manual__x", flow="A->B", from_cluster="A", to_cluster="B", translation="precise",
                topics=["t0"], groups=["g0"], started_at=T0, cutover_at=T0 + timedelta(seconds=8),
                resumed_at=T0 + timedelta(seconds=11), finished_at=T0 + timedelta(seconds=14), rto_s=3.0,
                failover_s=2.5, skipped=0, re_read=0, duplicates=0, ok=True,
                lag_before_cutover=LagBeforeCutover(canary_backlog=4, flow_lag=20, flow_max_partition_lag=12),
                partitions=[PartitionOutcome(group="g0", source_topic="t0", target_topic="A.t0", partition=0,
                                             a_next=90, a_high=100, b_offset=90, b_first_seq=90, read_on_b=10)],
                steps=[StepTiming(step="drill.canary", task_id="canary", result="ok", started_at=T0,
                                  ended_at=T0 + timedelta(seconds=8))],
                lag_timeline=[LagPoint(at=T0 + timedelta(seconds=i), flow_lag=i, canary_lag=i, canary_backlog=1)
                              for i in range(5)])
    return DrillSummary(**{**base, **kw})


def test_the_report_is_self_contained_html_with_the_figures(tmp_path: Path):
    html_path, json_path = write_report(_summary(), tmp_path, "drill-manual__x")
    html = html_path.read_text()
    assert "PASSED" in html and "3.00 s" in html and html.count("<svg") == 3
    assert "<script" not in html and "src=" not in html and "href=" not in html  # nothing fetched
    assert load_summary(json_path) == _summary()
    failed = render_html(_summary(ok=False, problems=["drill.resume_on_target: 2 record(s) skipped <g0>"]), "x.json")
    assert "FAILED" in failed and "2 record(s) skipped &lt;g0&gt;" in failed


def test_every_value_of_the_report_is_escaped_and_only_our_charts_are_markup():
    evil = '<img src=x onerror="alert(1)">'
    html = render_html(_summary(run_id=evil, flow=evil, from_cluster=evil, topics=[evil], groups=[evil],
                                partitions=[PartitionOutcome(group=evil, source_topic=evil, target_topic=evil,
                                                             partition=0, a_next=1, a_high=2, b_offset=1)],
                                steps=[StepTiming(step=evil, task_id=evil, result="ok", started_at=T0,
                                                  ended_at=T0 + timedelta(seconds=1))],
                                problems=[evil]), evil)
    assert "<img" not in html and "&lt;img src=x" in html
    assert html.count("<svg") == 3 and "&lt;svg" not in html  # the charts are inserted as markup…
    for svg in re.findall(r"<svg.*?</svg>", html, re.S):
        ET.fromstring(svg)  # …well-formed, with the hostile labels escaped inside them


def test_the_cli_re_renders_from_the_json_when_the_html_is_gone(tmp_path: Path):
    html_path, json_path = write_report(_summary(), tmp_path, "d")
    art = Artifact(artifact_id=1, kind="drill-report", run_id="manual__x", path=str(html_path),
                   summary={"json": str(json_path)}, created_at=T0)
    assert report_html(art) == html_path.read_text()
    html_path.unlink()
    assert "PASSED" in report_html(art)
    json_path.unlink()
    with pytest.raises(DrillNotFound, match="report files of drill manual__x are gone"):
        report_html(art)


def test_the_report_keeps_no_credential(tmp_path: Path):
    problem = ("g0: SaslAuthenticationException with sasl.jaas.config=org.apache.kafka.common.security.scram."
               'ScramLoginModule required username="app" password="hunter2"; at http://app:hunter2@b:8083')
    html_path, json_path = write_report(_summary(ok=False, problems=[problem]), tmp_path, "d")
    for text in (html_path.read_text(), json_path.read_text()):
        assert "hunter2" not in text and "SaslAuthenticationException" in text
