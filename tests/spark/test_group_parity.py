"""group_parity.py under real spark-submit (local[2]) on snapshots collected from the real devstack.

Two submissions: a clean failover passes; the faulty one fails and names every bad group/partition.
Each result is also checked row for row against the single-process classifier.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from mirrorbook.parity import collector, submit
from mirrorbook.parity.local import classify_groups
from tests.spark.conftest import CANARY, CONNECT_ONLY, PARTITIONS, SKIP_BY, Scene

pytestmark = pytest.mark.spark
MASTER = "local[2]"
COMPARED = ["cluster", "group", "topic", "partition", "status", "n", "reference_offset", "committed_offset",
            "out_of_range", "failed"]


def _job(scene_snapshot: collector.GroupSnapshot, out: Path, **kwargs) -> submit.SparkSubmitSpec:
    return submit.group_parity_job(scene_snapshot, out, master=MASTER, **kwargs)


def _same_as_single_process(summary: submit.ParitySummary, snap: collector.GroupSnapshot, **kwargs) -> list[dict]:
    spark_rows = pq.read_table(summary.outputs["rows"]).select(COMPARED).to_pylist()
    local_rows = classify_groups(pq.read_table(snap.expected), pq.read_table(snap.actual),
                                 pq.read_table(snap.watermarks), **kwargs).select(COMPARED).to_pylist()
    key = lambda r: (r["group"], r["topic"], r["partition"])  # noqa: E731
    assert sorted(spark_rows, key=key) == sorted(local_rows, key=key)
    return spark_rows


@CONNECT_ONLY
def test_clean_failover_passes(run_job, scene: Scene, admin_b, tmp_path: Path):
    expected = scene.expected(["g-precise", "g-mm2"])
    snap = collector.collect_group_snapshot(tmp_path / "snap", expected, {"B": admin_b})
    summary = run_job(_job(snap, tmp_path / "out"))

    assert summary.exit_code == 0 and summary.passed and summary.status == "passed", summary.failure_message()
    rows = {(r["group"], r["topic"], r["partition"]): r for r in _same_as_single_process(summary, snap)}
    for p in range(PARTITIONS):
        precise = rows[(scene.groups["g-precise"], scene.remote, p)]
        assert (precise["status"], precise["n"]) == ("OK", 0)
        pos = scene.positions[("g-mm2", p)]
        mm2 = rows[(scene.groups["g-mm2"], scene.remote, p)]
        # MM2's translation is conservative: at or before the true position, never past it.
        assert pos.translated <= pos.true
        assert (mm2["status"], mm2["n"]) == (("RE-READ", pos.true - pos.translated) if pos.translated < pos.true
                                            else ("OK", 0))
    # A partition the group commits on B that no expectation accounts for is reported, not failed.
    assert rows[(scene.groups["g-precise"], CANARY, 0)]["status"] == "UNEXPECTED"
    assert summary.counts["UNEXPECTED"] == 1 and summary.counts["SKIP"] == summary.counts["MISSING"] == 0
    assert summary.totals["reread_records"] == sum(scene.positions[("g-mm2", p)].true
                                                   - scene.positions[("g-mm2", p)].translated
                                                   for p in range(PARTITIONS))
    assert summary.check() is summary


def test_faulty_failover_fails_naming_groups_and_partitions(run_job, scene: Scene, admin_b, tmp_path: Path,
                                                            capfd: pytest.CaptureFixture[str], on_the_cluster):
    expected = scene.expected(["g-precise", "g-mm2", "g-skip", "g-missing"])
    snap = collector.collect_group_snapshot(tmp_path / "snap", expected, {"B": admin_b})
    max_reread = 10
    summary = run_job(_job(snap, tmp_path / "out", max_reread=max_reread))
    on_the_cluster()  # over Spark Connect: every task on the cluster's executor, none in the server's JVM

    assert summary.exit_code == 1 and summary.status == "failed" and not summary.passed
    rows = _same_as_single_process(summary, snap, max_reread=max_reread)
    g_skip, g_missing, g_mm2 = scene.groups["g-skip"], scene.groups["g-missing"], scene.groups["g-mm2"]
    failing = {(r["group"], r["partition"]): r for r in rows if r["failed"]}
    for p in range(PARTITIONS):
        assert (failing[(g_skip, p)]["status"], failing[(g_skip, p)]["n"]) == ("SKIP", SKIP_BY)
        assert failing[(g_missing, p)]["status"] == "MISSING"
        mm2 = scene.positions[("g-mm2", p)]
        assert ((g_mm2, p) in failing) == (mm2.true - mm2.translated > max_reread)
    assert summary.counts["SKIP"] == PARTITIONS and summary.counts["MISSING"] == PARTITIONS
    assert summary.totals["skipped_records"] == SKIP_BY * PARTITIONS

    # The verdict names the groups and partitions: in the summary, the message, and the job's stderr
    # (spark-submit's log; over Spark Connect, this process's own stderr).
    message = summary.failure_message()
    log = Path(summary.log).read_text() if summary.log else capfd.readouterr().err
    for p in range(PARTITIONS):
        true = scene.positions[("g-skip", p)].true
        line = f"B group {g_skip} {scene.remote}-{p}: SKIP {SKIP_BY} (committed {true + SKIP_BY}, true offset {true})"
        assert line in message and f"PARITY-FAIL group_parity {line}" in log
        assert f"B group {g_missing} {scene.remote}-{p}: MISSING" in message
    assert g_skip in summary.failing_groups() and g_missing in summary.failing_groups()
    assert scene.groups["g-precise"] not in summary.failing_groups()
    with pytest.raises(submit.ParityFailed) as err:
        summary.check()
    assert g_skip in str(err.value) and g_missing in str(err.value)


def test_malformed_snapshot_is_an_error_not_a_verdict(run_job, tmp_path: Path):
    import pyarrow as pa

    snap = collector.write_group_snapshot(tmp_path / "snap", [collector.ExpectedOffset(
        cluster="B", group="g", topic="t", partition=0, expected_offset=1)], {"B": {}})
    pq.write_table(pa.table({"cluster": ["B"], "group": ["g"], "topic": ["t"], "partition": [0]}), snap.actual)
    summary = run_job(_job(snap, tmp_path / "out"))

    assert summary.exit_code == 2 and summary.status == "error" and not summary.passed
    assert "lacks column(s) committed_offset" in summary.error
    with pytest.raises(submit.SparkJobError, match="committed_offset"):
        summary.check()


def test_over_spark_connect_the_server_reads_nothing_from_this_disk(spark_connect, scene: Scene, admin_b,
                                                                     tmp_path: Path):
    """Each snapshot file is deleted as soon as its DataFrame is built, before any job runs on the server:
    the proof still completes, so the server never needed a path of this machine."""
    from mirrorbook.parity import connect

    snap = collector.collect_group_snapshot(tmp_path / "snap", scene.expected(["g-precise", "g-mm2"]), {"B": admin_b})
    spec = _job(snap, tmp_path / "out")
    app = connect.load_app(spec.application)
    common = connect.load_common(Path(spec.application).parent)

    class Vanishing(common.Arrow):
        def frame(self, spark, path):
            df = super().frame(spark, path)
            Path(path).unlink()
            return df

    args = app.parse_args(spec.application_args)
    with connect.client_mode():
        spark = connect.session(spark_connect.url)
        # Off for this session: the server's plan cache would keep each query's copy of the snapshots in its plan.
        assert spark.conf.get(connect.PLAN_CACHE) == "false"
        code = common.run_app(app.APP, args, app.body(args, Vanishing()), spark=spark)
    summary = submit.ParitySummary.model_validate_json(spec.summary_path.read_text())
    assert code == 0 and summary.passed and summary.master == "spark-connect", summary.failure_message()
    assert not snap.expected.exists() and not snap.actual.exists()
    assert summary.counts["OK"] + summary.counts["RE-READ"] == len(scene.expected(["g-precise", "g-mm2"]))
