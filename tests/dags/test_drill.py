"""dr_drill end to end: real Airflow (dag.test), on the secured stack (a drill stops the flow, and no plaintext
test shares that stack) — the canary created, produced and consumed as the `mirrorbook` principal over SASL_SSL
within its ACLs — with sequence numbers that prove the consumers resumed on B skipped nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mirrorbook.audit import AuditStore
from mirrorbook.cli import main
from mirrorbook.devstack.stack import DevStack
from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.replication.mm2_connect_status import flow_status
from tests.conftest import ensure_replicating, stack_clients
from tests.helpers import eventually

pytestmark = [pytest.mark.airflow, pytest.mark.integration]

CONF = {"flow": "A->B", "rate": 150, "produce_s": 4, "partitions": 2, "groups": 2, "sample_interval_s": 0.5,
        "drain_timeout": 60, "steady_timeout_s": 60, "resume_timeout_s": 60}


@pytest.fixture
def drill(secured: DevStack) -> DevStack:
    """The secured stack with A->B replicating, as a drill finds a flow it may exercise (the first test on a
    freshly started stack, or after another test's run, may come before its heartbeats do)."""
    ensure_replicating(secured)
    flow = secured.require().topology().flow("A->B")
    eventually(lambda: flow_status(stack_clients(secured), flow).state.value == "REPLICATING", timeout=120,
               what="A->B REPLICATING")
    return secured


def test_a_drill_fails_over_the_canary_with_zero_skipped_reports_it_and_restores_the_flow(
        drill, run_dag, audit: AuditStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    run = run_dag("dr_drill", CONF)
    assert run.state == "success", run.failure() or run.task_states()

    # Listed in the audit, with the figures; the HTML has the charts; the JSON has the data.
    [art] = audit.artifacts(kind="drill-report", run_id=run.run_id)
    html = Path(art.path).read_text()
    summary = json.loads(Path(art.summary["json"]).read_text())
    assert art.summary["skipped"] == summary["skipped"] == 0
    assert art.summary["rto_s"] == summary["rto_s"] > 0 and art.summary["ok"] is True
    assert summary["re_read"] == 0  # precise translation: the exact next record
    assert "PASSED" in html and f"{summary['rto_s']:.2f} s" in html and html.count("<svg") == 3
    assert "Replication lag of A-&gt;B" in html and "Step timeline" in html
    assert "records the flow lost before replication (health check)" in html  # its known loss, or "not known"
    assert run.recorded_result() == "success"

    # Every group resumed on B exactly where it stopped on A, and read every record it had not read there.
    assert len(summary["partitions"]) == 2 * 2 * 2  # groups x topics x partitions
    for p in summary["partitions"]:
        assert p["skipped"] == 0 and p["duplicates"] == 0
        assert p["read_on_b"] == p["a_high"] - p["a_next"]
        assert p["b_first_seq"] in (None, p["a_next"])
    assert any(p["read_on_b"] > 0 for p in summary["partitions"])  # the lagging group had records left
    assert summary["consumed_on_a"] > 0 and summary["produced"] >= 150 * 4 * 0.8

    # Lag before the cutover, the lag timeline from the metrics history, and the time per step.
    assert summary["lag_before_cutover"]["canary_backlog"] is not None
    assert [p for p in summary["lag_timeline"] if p["source"] == "dr_drill"]
    steps = [s["step"] for s in summary["steps"]]
    for step in ("drill.canary", "failover.precheck", "drill.wait_drained", "failover.translate",
                 "failover.write_offsets", "failover.verify", "connector.stop (source)", "drill.resume_on_target",
                 "connector.resume (source)", "drill.cleanup"):
        assert step in steps
    assert summary["cutover_at"] < summary["resumed_at"]

    # The flow is as the drill found it; the drill's groups are gone from both clusters.
    topo = drill.require().topology()
    # Resumed by the drill, the flow shows REPLICATING again once its heartbeats arrive on B.
    eventually(lambda: flow_status(stack_clients(drill), topo.flow("A->B")).state.value == "REPLICATING", timeout=120,
               what="A->B REPLICATING again after the drill")
    assert summary["flow_state_before"] == summary["flow_state_after"] == "REPLICATING"
    for cluster in ("A", "B"):
        assert not set(summary["groups"]) & set(KafkaAdmin(drill.require().kafka_config(cluster)).list_groups())

    # `mirrorbook drill list` and `mirrorbook drill report RUN_ID --out FILE`.
    assert main(["drill", "list"]) == 0
    assert f"{run.run_id} flow=A->B PASSED rto_s={summary['rto_s']} skipped=0" in capsys.readouterr().out
    out = tmp_path / "drill.html"
    assert main(["drill", "report", run.run_id, "--out", str(out)]) == 0
    assert out.read_text() == html
    assert main(["drill", "report", "no-such-run", "--out", str(out)]) == 2


def test_a_drill_on_topics_the_flow_does_not_replicate_is_refused_before_any_change(drill, run_dag,
                                                                                    audit: AuditStore):
    run = run_dag("dr_drill", {**CONF, "topic_prefix": "__drill"})  # MM2's default topics.exclude: __.*
    assert run.state == "failed"
    states = run.task_states()
    assert states["canary"] == "failed" and states["stop_flow"] == "upstream_failed"
    assert states["restore"] == "success" and states["report"] == "failed"
    assert run.recorded_result() == "failed"
    assert "does not replicate the canary topic(s) __drill-t0, __drill-t1" in run.failure()
    assert run.mutating_calls() == 0
    [art] = audit.artifacts(kind="drill-report", run_id=run.run_id)
    summary = json.loads(Path(art.summary["json"]).read_text())
    assert summary["ok"] is False and summary["restored"].startswith("nothing to restore")
