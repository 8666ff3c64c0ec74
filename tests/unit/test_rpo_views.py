"""Where an unplanned failover's RPO is shown: the bound from the moment of the failover, and the exact figure once
the source was reachable again — `mirrorbook audit rpo` and the move reports (store: a real SQLite file)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mirrorbook.audit import AuditStore
from mirrorbook.cli import main
from mirrorbook.mm2.counts import Count
from mirrorbook.runbooks import rpo
from mirrorbook.runbooks.move_report import render_report
from mirrorbook.topology import FlowSpec

FLOW = FlowSpec(source="A", target="B", connect_cluster="B")
BOUND = {"records": 520, "kind": "lower-bound", "partitions": {"orders-0": 520}, "basis": "the source end offsets "
         "sampled at 2026-11-23T10:00:00+00:00",
         "unknown": "records the source received after that", "sampled_at": None}


def _failover(store: AuditStore, run_id: str) -> None:
    store.record(action=rpo.BOUND, kind="step", result="ok", run_id=run_id, flow=FLOW.name,
                 details={"rpo": BOUND, "failover_started_at": "2026-11-23T10:01:15+00:00", "partitions": 1})


def _exact(store: AuditStore, run_id: str, n: int) -> None:
    store.record(action=rpo.EXACT, kind="step", result="ok", run_id=run_id, flow=FLOW.name,
                 details={"failover_run_id": run_id, "records": Count.exact(n).model_dump(), "exact": True,
                          "partitions": {"orders-0": {"records": Count.exact(n).model_dump(), "reached": 99,
                                                      "cutoff": 99 + n + 1, "rule": "unique-match", "note": None}},
                          "gone": [], "basis": "A's log as read once reachable again",
                          "computed_at": "2026-11-23T11:00:00Z",
                          "computed_by_run_id": "health-1"})


@pytest.fixture
def store(tmp_path: Path) -> AuditStore:
    return AuditStore(f"sqlite:///{tmp_path / 'audit.db'}")


def test_audit_rpo_shows_the_bound_then_the_exact_figure(store: AuditStore, capsys: pytest.CaptureFixture) -> None:
    _failover(store, "fo-1")
    db = ["--url", str(store.url)]
    assert main(["audit", "rpo", *db]) == 0
    out = capsys.readouterr().out
    assert "failover run fo-1" in out and "at least 520 record(s)" in out and "not known yet" in out
    assert [b.run_id for b in rpo.pending(store, FLOW)] == ["fo-1"]
    _exact(store, "fo-1", 1030)
    assert rpo.pending(store, FLOW) == []  # computed once: nothing left to count
    assert main(["audit", "rpo", *db, "--flow", "A->B"]) == 0
    out = capsys.readouterr().out
    assert "at least 520 record(s)" in out and "1030 record(s) written before the failover began" in out
    assert "orders-0 1030" in out and "by run health-1" in out
    assert main(["audit", "list", *db, "--run-id", "fo-1"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert "rpo: at least 520 (lower bound)" in listed[0] and "rpo: 1030 (counted by run health-1)" in listed[1]
    assert main(["audit", "rpo", *db, "--run-id", "fo-1", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["bound"]["records"] == 520 and row["exact"]["records"] == {"low": 1030, "high": 1030}


def test_the_reports_show_both_figures(store: AuditStore) -> None:
    _failover(store, "fo-2")
    failover = {"direction": "failover", "flow": "A->B", "from_cluster": "A", "to_cluster": "B", "rto_s": 3.0,
                "rpo": rpo.report_entry(rpo.history(store, run_id="fo-2")[0])}
    text = render_report(failover)
    assert "RPO: at least 520 record(s) never reached the target (a lower bound)" in text
    assert "exact figure: not known yet — counted once A is reachable again" in text
    _exact(store, "fo-2", 7)
    failback = {"direction": "failback", "flow": "A->B", "from_cluster": "B", "to_cluster": "A", "rto_s": 3.0,
                "rpo": rpo.latest(store, FLOW)}
    text = render_report(failback)
    assert "RPO of failover run fo-2: at least 520" in text
    assert "RPO of failover run fo-2, exact figure (exact, counted" in text and "7 record(s) written before" in text


def test_records_known_lost_before_the_failover_are_shown_beside_the_bound(store: AuditStore,
                                                                           capsys: pytest.CaptureFixture) -> None:
    known = {"records": 14, "data_loss": 10, "target_reset": 4, "sampled_at": "2026-11-23T09:55:00+00:00",
             "partitions": []}
    store.record(action=rpo.BOUND, kind="step", result="ok", run_id="fo-3", flow=FLOW.name,
                 details={"rpo": BOUND | {"known_lost": known}, "failover_started_at": "2026-11-23T10:01:15+00:00"})
    line = ("besides, 14 record(s) known lost before the failover (health check, as of 2026-11-23T09:55:00+00:00: "
            "10 DATA_LOSS, 4 TARGET_RESET): gone from the target whatever the figures above")
    assert main(["audit", "rpo", "--url", str(store.url)]) == 0
    assert line in capsys.readouterr().out
    text = render_report({"direction": "failover", "flow": "A->B", "from_cluster": "A", "to_cluster": "B",
                          "rpo": rpo.report_entry(rpo.history(store, run_id="fo-3")[0])})
    assert f"RPO: {line}" in text
    assert rpo.render_known_lost(BOUND) is None  # a bound without known loss says nothing more

