"""record_parity.py reading the devstack's topics through Spark's Kafka source (the spark-sql-kafka 4.2.0 jar
set resolved by maven.spark_kafka_libs, on pyspark 4.3.0), on the session's Spark Connect server (on the session's
Spark standalone cluster), by a real spark-submit (local[2]), and by one through a parity URI to that cluster.

Records + boundaries on the clean mirror (pass); records + boundaries with tampered partitions on B (fail,
named), over Connect and by spark-submit through MIRRORBOOK_PARITY_URI; checksums only over whole topics
(fail on the tampered pairs).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
import pyarrow.parquet as pq
import pytest

from mirrorbook.devstack.workload import load, produce_transactional, record
from mirrorbook.kafka.reader import read_ranges
from mirrorbook.kafka.types import TP
from mirrorbook.parity import collector, submit
from tests.conftest import SparkConnectServer
from tests.helpers import eventually, produce_records, wait_mirrored
from tests.spark.conftest import CONNECT_ONLY, PARTITIONS, RECORDS, SKIP_BY, Scene

pytestmark = pytest.mark.spark
MASTER = "local[2]"
BASE = 10  # records per partition of the tampered topic before tampering


@dataclass(frozen=True)
class Tampered:
    topic: str
    remote: str


# Each proof runs with both readers: the batched one forced to read several partitions per task (READ_TASKS tasks for
# the five or more partitions a side's read spans here), and Spark's Kafka source (a task per partition).
READ_TASKS = 2


@pytest.fixture(params=["batched", "kafka-source"])
def reader(request: pytest.FixtureRequest) -> dict:
    """record_parity_job's reader arguments."""
    return {"reader": "batched", "read_tasks": READ_TASKS} if request.param == "batched" else \
        {"reader": "kafka-source"}


@pytest.fixture(scope="module")
def tampered(devstack, admin_a, admin_b, bootstrap_a, bootstrap_b) -> Tampered:
    """Partition 0: a foreign record on B. Partition 1: a copy of the record A writes at offset 12, produced on
    B before A writes offsets 10-14, so B holds it twice, the first time out of order."""
    topic = f"faulty-{uuid.uuid4().hex[:6]}"
    remote = f"A.{topic}"
    load(bootstrap_a, [topic], 2, BASE)
    wait_mirrored(admin_a, admin_b, topic, remote)
    now = int(time.time() * 1000)
    produce_records(bootstrap_b, remote, 0, [(record(topic, 0, BASE, origin="foreign"), now)])
    produce_records(bootstrap_b, remote, 1, [(record(topic, 1, 12, origin="workload"), now)])
    produce_records(bootstrap_a, topic, 1, [(record(topic, 1, seq, origin="workload"),
                                             now if seq == 12 else now + 1 + seq) for seq in range(BASE, BASE + 5)])
    wait_mirrored(admin_a, admin_b, topic, remote)
    highs = admin_b.high_watermarks([TP(remote, 0), TP(remote, 1)])
    assert highs == {TP(remote, 0): BASE + 1, TP(remote, 1): BASE + 6}
    return Tampered(topic, remote)


def _ranges(admin_a, admin_b, topic: str, remote: str) -> list[collector.RecordRange]:
    src = admin_a.watermarks(admin_a.partitions([topic]))
    tgt = admin_b.watermarks(admin_b.partitions([remote]))
    return collector.whole_topic_ranges(topic, remote, src, tgt)


@CONNECT_ONLY
def test_clean_mirror_and_group_boundaries_pass(run_job, reader, scene: Scene, admin_a, admin_b, bootstrap_a,
                                                bootstrap_b, tmp_path: Path):
    snap = collector.write_record_snapshot(
        tmp_path / "snap", _ranges(admin_a, admin_b, scene.topic, scene.remote),
        scene.boundaries("g-precise") + scene.boundaries("g-mm2"))
    spec = submit.record_parity_job(bootstrap_a, bootstrap_b, tmp_path / "out", snapshot=snap, master=MASTER,
                                    **reader)
    assert any("spark-sql-kafka-0-10_2.13-4.2.0.jar" in j for j in spec.jars)
    summary = run_job(spec)

    assert summary.exit_code == 0 and summary.passed, summary.failure_message()
    assert summary.model_extra["inputs"]["readers"] == {"source": reader["reader"], "target": reader["reader"]}
    assert summary.model_extra["inputs"]["placement"] == "arrow"
    assert summary.totals["matched"] == PARTITIONS * RECORDS
    assert summary.totals["missing"] == summary.totals["extra"] == summary.totals["order_violations"] == 0
    pairs = pq.read_table(summary.outputs["pairs"]).to_pylist()
    assert len(pairs) == PARTITIONS and all(p["checksum_equal"] and p["source_records"] == RECORDS for p in pairs)
    bounds = {(b["group"], b["source_partition"]): b for b in pq.read_table(summary.outputs["boundaries"]).to_pylist()}
    for p in range(PARTITIONS):
        precise = bounds[(scene.groups["g-precise"], p)]
        # The record at T on B is the record at C on A.
        assert (precise["status"], precise["exact"], precise["reread"], precise["skip"]) == ("OK", True, 0, 0)
        assert precise["next_source"]["hash"] == precise["next_target"]["hash"]
        pos = scene.positions[("g-mm2", p)]
        mm2 = bounds[(scene.groups["g-mm2"], p)]
        assert (mm2["reread"], mm2["skip"]) == (pos.true - pos.translated, 0)
        assert not mm2["failed"]


CUT = 3  # the scene's partition 2 is compared without its last records on the target: they are MISSING


def _tampered_job(scene: Scene, t: Tampered, admin_a, admin_b, bootstrap_a, bootstrap_b, tmp_path: Path,
                  master: str = MASTER, **kwargs) -> submit.SparkSubmitSpec:
    """The scene's skipping group, a foreign record's group, a group on the out-of-order partition and one
    with nothing committed on the target; the scene's partition 2 compared without its last CUT records."""
    foreign = collector.GroupBoundary(group="g-foreign", source_topic=t.topic, source_partition=0,
                                      source_committed=BASE, target_topic=t.remote, target_partition=0,
                                      target_offset=BASE)  # A is at its end; on B the foreign record is next
    disordered = foreign.model_copy(update={"group": "g-order", "source_partition": 1, "target_partition": 1,
                                            "target_offset": BASE + 1})
    gone = foreign.model_copy(update={"group": "g-gone", "target_offset": None})
    scene_ranges = [r.model_copy(update={"target_end": r.target_end - CUT}) if r.source_partition == 2 else r
                    for r in _ranges(admin_a, admin_b, scene.topic, scene.remote)]
    snap = collector.write_record_snapshot(
        tmp_path / "snap", scene_ranges + _ranges(admin_a, admin_b, t.topic, t.remote),
        scene.boundaries("g-skip") + [foreign, disordered, gone])
    return submit.record_parity_job(bootstrap_a, bootstrap_b, tmp_path / "out", snapshot=snap, master=master, **kwargs)


def _tampered_verdict(summary: submit.ParitySummary, log: str | None, scene: Scene, t: Tampered) -> None:
    """EXTRA (a foreign record), EXTRA and ORDER (a record copied twice, first out of order), MISSING
    records, SKIP n found from the records, MISMATCH (a group that would resume on the foreign record),
    MISSING (a group with nothing committed on the target), UNPROVABLE (a group on the out-of-order
    partition: no count of re-reads and skips is proven there), each named."""
    assert summary.status == "failed", summary.failure_message()
    diffs = sorted((d["target_topic"], d["target_partition"], d["kind"], d["source_offset"], d["target_offset"])
                   for d in pq.read_table(summary.outputs["differences"]).to_pylist())
    cut = [(scene.remote, 2, "MISSING", RECORDS - CUT + i, None) for i in range(CUT)]
    assert diffs == sorted([(t.remote, 0, "EXTRA", None, BASE), (t.remote, 1, "EXTRA", None, 13),
                            (t.remote, 1, "ORDER", 12, BASE), *cut])
    pairs = {(p["source_topic"], p["source_partition"]): p for p in pq.read_table(summary.outputs["pairs"]).to_pylist()}
    assert not pairs[(t.topic, 0)]["checksum_equal"] and pairs[(t.topic, 1)]["order_violations"] == 1
    assert [pairs[(scene.topic, p)]["missing"] for p in range(PARTITIONS)] == [0, 0, CUT]
    bounds = {b["group"]: b for b in pq.read_table(summary.outputs["boundaries"]).to_pylist()}
    assert (bounds["g-order"]["status"], bounds["g-order"]["ordered"], bounds["g-order"]["failed"]) == \
        ("UNPROVABLE", False, False)
    assert (bounds["g-gone"]["status"], bounds["g-gone"]["failed"]) == ("MISSING", True)
    assert summary.totals["boundary_unprovable"] == 1 and summary.totals["missing"] == CUT

    message = summary.failure_message(limit=100)
    assert f"pair {t.topic}-0 -> {t.remote}-0: counts/checksums differ" in message \
        and "1 extra on the target" in message
    assert (f"record {t.topic}-1 -> {t.remote}-1: ORDER: source offset 12 is at target offset {BASE}, "
            f"before its predecessor's 12") in message
    assert f"record {t.topic}-0 -> {t.remote}-0: EXTRA on the target: target offset {BASE}" in message
    assert f"record {scene.topic}-2 -> {scene.remote}-2: MISSING on the target: source offset {RECORDS - 1}" in message
    for p in range(PARTITIONS):
        pos = scene.positions[("g-skip", p)]
        assert (f"group {scene.groups['g-skip']} {scene.topic}-{p} -> {scene.remote}-{p}: SKIP {SKIP_BY} "
                f"(source committed {pos.committed}, target committed {pos.true + SKIP_BY}, "
                f"true target offset {pos.true})") in message  # the truth, found from the records
    assert f"group g-foreign {t.topic}-0 -> {t.remote}-0: MISMATCH" in message
    assert f"group g-gone {t.topic}-0 -> {t.remote}-0: MISSING: nothing is committed on the target" in message
    if log is not None:  # the job's stderr names it too
        assert "PARITY-FAIL record_parity group g-foreign" in log


@CONNECT_ONLY
def test_tampered_mirror_and_skipping_group_fail_named(run_job, reader, capfd, scene: Scene, tampered: Tampered,
                                                       admin_a, admin_b, bootstrap_a, bootstrap_b, tmp_path: Path,
                                                       on_the_cluster):
    summary = run_job(_tampered_job(scene, tampered, admin_a, admin_b, bootstrap_a, bootstrap_b, tmp_path, **reader))
    on_the_cluster()  # the Kafka reads and the comparison: tasks of the cluster's executor, none the server's
    assert summary.exit_code == 1
    # over Spark Connect the job's lines go to this process's stderr
    _tampered_verdict(summary, capfd.readouterr().err, scene, tampered)


# The default reader only: a cold spark-submit costs the suite half a minute, and the Kafka source's own cold
# spark-submit is the secured tests' fallback case (test_record_parity_secured.py).
@pytest.mark.parametrize("reader", ["batched"], indirect=True)
def test_spark_submit_through_a_parity_uri_reads_and_writes_nothing_of_this_worker(
        reader, scene: Scene, tampered: Tampered, admin_a, admin_b, bootstrap_a, bootstrap_b, tmp_path: Path,
        monkeypatch, spark_connect: SparkConnectServer):
    """The tampered mirror's verdict by spark-submit with MIRRORBOOK_PARITY_URI, through the proof operator's
    own path (ParitySparkSubmitOperator.run_job: the Spark provider's SparkSubmitHook, the spark_default
    connection), to the session's Spark standalone cluster (the master the Connect server runs on) in client mode.

    What is real: a cluster — a standalone master, and a worker whose executor (a JVM of its own, started by the
    worker for this application beside the Connect server's) runs the job's tasks; the staging of the snapshots to
    a file:// URI; a real spark-submit whose driver reads them, and writes its Parquet results and its JSON summary,
    through Hadoop's FileSystem at that URI; the Kafka client options (a private file) shipped with the job by
    spark-submit --files, never to the URI, and found by the driver where Spark put them; the operator reading the
    summary and the results back through the URI (pyarrow.fs). The local snapshot files are deleted once staged,
    before spark-submit starts, and the job is given no path of this worker.

    What is not: another machine. The driver (client mode) and the executor share this one, and the "shared mount"
    is a local directory. A non-local master without the URI is refused (test_pause_resume) and gets no local-only
    settings (test_contract)."""
    from mirrorbook.airflow.operators.parity import ParitySparkSubmitOperator
    from mirrorbook.parity import staging
    from mirrorbook.runbooks.params import FailoverParams

    host, port = spark_connect.master.rsplit(":", 1)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": host,
                                                                 "port": int(port)}))
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")  # the driver as the executor reaches it (client mode)
    shared = tmp_path / "shared-mount"
    uri = f"file://{shared}"
    # The executor the cluster starts for this one small job: quick to start, as the job's own driver is on a
    # local master (a non-local master's jobs get no such settings of ours: test_contract).
    job = _tampered_job(scene, tampered, admin_a, admin_b, bootstrap_a, bootstrap_b, tmp_path / "worker",
                        master=spark_connect.master, source_options={"security.protocol": "PLAINTEXT"},
                        conf={"spark.executor.extraJavaOptions": submit.QUICK_START_JVM}, **reader)
    options = Path(job.application_args[job.application_args.index("--kafka-options-file") + 1])
    real_stage = staging.stage

    def stage_then_forget(spec, uri, key):  # what the cluster's driver could not open anyway
        staged = real_stage(spec, uri, key)
        for p in (tmp_path / "worker" / "snap").iterdir():
            p.unlink()
        # the options go with the job (spark-submit --files reads them here), named only by their file name
        assert staged.job.files == [str(options)] and "kafka-options.json" in staged.job.application_args
        return staged
    monkeypatch.setattr(staging, "stage", stage_then_forget)

    op = ParitySparkSubmitOperator(task_id="record_parity", check="move", app="record_parity",
                                   params_model=FailoverParams)
    summary = op.run_job(job, None, uri, "mm2_failover/run-1/record_parity")

    base = f"{uri}/mm2_failover/run-1/record_parity"
    inputs = summary.model_extra["inputs"]
    assert inputs["ranges"] == f"{base}/snapshot/ranges.parquet"  # what the job was given: URIs only
    assert inputs["boundaries"] == f"{base}/snapshot/boundaries.parquet"
    assert (shared / "mm2_failover/run-1/record_parity/summary.json/_SUCCESS").is_file()  # the driver's write
    assert not list((tmp_path / "worker" / "snap").iterdir())
    assert summary.model_extra["staged_at"] == base and summary.model_extra["master"] == spark_connect.master
    assert Path(summary.outputs["boundaries"]).is_relative_to(tmp_path / "worker")  # fetched back here
    assert json.loads(job.summary_path.read_text())["staged_at"] == base
    _tampered_verdict(summary, None, scene, tampered)
    _ran_on_the_cluster(spark_connect, "mirrorbook-record_parity")


def _ran_on_the_cluster(server: SparkConnectServer, name: str) -> None:
    """The master lists the job's application, finished, its cores granted; the worker ran an executor for it (a
    JVM of its own: the driver was spark-submit's, here) whose log shows the job's tasks."""
    apps = [a for a in httpx.get(f"{server.master_ui}/json/", timeout=10).json()["completedapps"] if a["name"] == name]
    assert apps and apps[-1]["state"] == "FINISHED" and apps[-1]["cores"] > 0, apps
    executor_logs = list(server.work_dir.glob(f"{apps[-1]['id']}/*/stderr"))
    assert executor_logs and any("Running task" in log.read_text() for log in executor_logs), executor_logs


@CONNECT_ONLY
def test_checksums_over_whole_topics_name_the_tampered_partitions(run_job, reader, scene: Scene,
                                                                  tampered: Tampered, bootstrap_a,
                                                                  bootstrap_b, tmp_path: Path):
    t = tampered
    summary = run_job(submit.record_parity_job(bootstrap_a, bootstrap_b, tmp_path / "out", master=MASTER,
                                            topics={scene.topic: scene.remote, t.topic: t.remote},
                                            checksums_only=True, **reader))

    assert summary.exit_code == 1 and summary.status == "failed"
    assert summary.failures_total == 2
    labels = sorted(f.label for f in summary.failures)
    assert labels == [f"pair {t.topic}-0 -> {t.remote}-0", f"pair {t.topic}-1 -> {t.remote}-1"]
    pairs = {(p["source_topic"], p["source_partition"]): p for p in pq.read_table(summary.outputs["pairs"]).to_pylist()}
    assert (pairs[(t.topic, 1)]["source_records"], pairs[(t.topic, 1)]["target_records"]) == (BASE + 5, BASE + 6)
    assert all(pairs[(scene.topic, p)]["checksum_equal"] for p in range(PARTITIONS))
    assert "differences" not in summary.outputs


def test_bounded_reads_never_let_the_broker_hold_a_fetch_and_the_clients_own_option_wins():
    """A range starting inside a record batch made Spark's consumer wait the broker's fetch.max.wait.ms (500 ms)
    once per partition — 18 partitions cost seconds (benchmarks/record_proof.py prints the two side by side)."""
    from mirrorbook.parity import connect

    app = connect.load_app(submit.record_parity_job("a:9092", "b:9092", Path("/nonexistent"),
                                                    topics={"t": "A.t"}).application)
    args = app.parse_args(["--source-bootstrap", "a:9092", "--target-bootstrap", "b:9092", "--topic", "t=A.t",
                           "--target-option", "fetch.max.wait.ms=250", "--output", "/x", "--summary", "/x/s.json"])
    assert app.kafka_options(args, "source")["kafka.fetch.max.wait.ms"] == "10"
    assert app.kafka_options(args, "target")["kafka.fetch.max.wait.ms"] == "250"


TXNS, TXN_RECORDS = 6, 4  # per partition: transactions of 4 records, every 2nd aborted, each ending in its marker


@pytest.fixture(scope="module")
def transactional(devstack, admin_a, admin_b, bootstrap_a, bootstrap_b) -> tuple[str, str, dict[int, dict[int, int]]]:
    """A topic written in transactions (committed and aborted, the last one aborted: the partitions end with a
    marker), mirrored by MM2 — whose default source consumer copies the aborted records too, as plain records.
    Returns the topic, its remote and, per partition, seq (the record's offset on A) -> offset of its copy on B."""
    topic = f"txn-{uuid.uuid4().hex[:6]}"
    remote = f"A.{topic}"
    admin_a.create_topics({topic: 2})
    rep = produce_transactional(bootstrap_a, [topic], TXNS, TXN_RECORDS, abort_every=2)
    want = {TP(remote, p): rep.committed[f"{topic}-{p}"] + rep.aborted[f"{topic}-{p}"] for p in range(2)}
    eventually(lambda: remote in admin_b.topics() and admin_b.high_watermarks(list(want)) == want,
               what=f"{topic}'s records, aborted ones included, copied to B")
    copies = {p: {json.loads(m.value())["seq"]: m.offset() for m in read_ranges(bootstrap_b, {TP(remote, p): (0, n)})}
              for p, n in ((tp.partition, n) for tp, n in want.items())}
    return topic, remote, copies


@CONNECT_ONLY
def test_markers_and_aborted_records_are_never_missing_extra_re_read_or_next(run_job, reader, transactional,
                                                                            admin_a, bootstrap_a, bootstrap_b,
                                                                            tmp_path: Path):
    """On A each transaction takes TXN_RECORDS + 1 offsets (its marker); on B MM2 wrote the records only, aborted
    ones too. Groups at C = 10 on A (the first record of the third transaction, after an aborted one): at its
    copy (OK); before the copies of the aborted transaction (OK: those are no records the group re-reads, and
    the record it reads next is the same); two committed records earlier (RE-READ 2, the aborted copies in
    between not counted); one record past it (SKIP 1)."""
    topic, remote, copies = transactional
    step = TXN_RECORDS + 1
    c = 2 * step  # offsets 0-3 committed (marker 4), 5-8 aborted (marker 9): the next committed record is at 10
    at = {p: copies[p][c] for p in range(2)}  # on B: 0-3, then 4-7 the aborted copies, then 8 = the copy of 10
    assert at == {0: 8, 1: 8}
    positions = {"g-exact": 8, "g-before-aborted": 4, "g-reread": 2, "g-skip": 9}
    boundaries = [collector.GroupBoundary(group=g, source_topic=topic, source_partition=p, source_committed=c,
                                          target_topic=remote, target_partition=p, target_offset=t)
                  for g, t in positions.items() for p in range(2)]
    src = admin_a.watermarks(admin_a.partitions([topic]), with_lso=True)
    ranges = [collector.RecordRange(source_topic=topic, source_partition=p, target_topic=remote, target_partition=p,
                                    source_start=0, source_end=src[TP(topic, p)].high, target_start=0,
                                    target_end=len(copies[p]), source_stable_end=src[TP(topic, p)].lso)
              for p in range(2)]
    snap = collector.write_record_snapshot(tmp_path / "snap", ranges, boundaries)
    summary = run_job(submit.record_parity_job(bootstrap_a, bootstrap_b, tmp_path / "out", snapshot=snap,
                                               master=MASTER, **reader))
    verdicts = {(b["group"], b["source_partition"]): b
                for b in pq.read_table(summary.outputs["boundaries"]).to_pylist()}
    assert verdicts  # the guard of the loop below
    for p in range(2):
        got = {g: (verdicts[(g, p)]["status"], verdicts[(g, p)]["n"]) for g in positions}
        assert got == {"g-exact": ("OK", 0), "g-before-aborted": ("OK", 0), "g-reread": ("RE-READ", 2),
                       "g-skip": ("SKIP", 1)}, (p, got)
        assert verdicts[("g-exact", p)]["true_offset"] == 8
    aborted = (TXNS // 2) * TXN_RECORDS * 2
    assert summary.totals["missing"] == summary.totals["extra"] == summary.totals["order_violations"] == 0
    assert (summary.totals["aborted"], summary.totals["aborted_copies"]) == (aborted, aborted)
    assert summary.totals["matched"] == TXNS * TXN_RECORDS * 2 - aborted  # the committed records, each with its copy
    assert summary.failures_total == 2 and {f.label.split()[1] for f in summary.failures} == {"g-skip"}  # it alone
