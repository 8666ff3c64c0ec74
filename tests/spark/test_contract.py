"""The contract between the library and the Spark apps, checked without starting a JVM:
schemas in step, --help, the spark-submit command line, the jar set, snapshot validation."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from pydantic import ValidationError

from mirrorbook import maven
from mirrorbook.maven import versions
from mirrorbook.parity import collector, schemas, submit

pytestmark = pytest.mark.spark
APPS = submit.apps_dir()
sys.path.insert(0, str(APPS))
import parity_common  # noqa: E402  (the apps' shared module, importable without a SparkSession)

SPARK_TYPE = {pa.string(): "string", pa.int32(): "int", pa.int64(): "bigint"}


@pytest.mark.parametrize("name", sorted(schemas.INPUTS))
def test_input_schemas_match_the_apps(name: str):
    arrow = [(f.name, SPARK_TYPE[f.type], f.nullable) for f in schemas.INPUTS[name]]
    spark = [(f.name, f.dataType.simpleString(), f.nullable) for f in parity_common.SCHEMAS[name].fields]
    assert arrow == spark


@pytest.mark.parametrize("app, columns", [
    ("group_parity", ["expected_offset", "true_offset", "committed_offset", "RE-READ n", "SKIP n", "MISSING"]),
    ("record_parity", ["source_committed", "target_offset", "checksums", "ORDER", "EXTRA", "--checksums-only"]),
])
def test_apps_document_themselves_without_spark(app: str, columns: list[str]):
    out = subprocess.run([sys.executable, str(APPS / f"{app}.py"), "--help"], capture_output=True, text=True,
                         cwd=APPS, timeout=60)
    assert out.returncode == 0, out.stderr
    for c in columns:
        assert c in out.stdout


def test_apps_import_only_pyspark_and_the_standard_library():
    apps = sorted(APPS.glob("*.py"))
    assert apps, APPS
    for path in apps:
        text = path.read_text()
        assert "import mirrorbook" not in text and "from mirrorbook" not in text and "airflow" not in text, path


def test_record_parity_command_line(tmp_path: Path):
    snap = collector.write_record_snapshot(tmp_path, [collector.RecordRange(
        source_topic="t", source_partition=0, target_topic="A.t", target_partition=0)])
    spec = submit.record_parity_job("a:9092", "b:9092", tmp_path / "out", snapshot=snap,
                                    source_options={"sasl.jaas.config": "secret-value"},
                                    source_rdkafka={"sasl.password": "rd-secret", "logger": object()},
                                    reader="batched", read_tasks=3)
    cmd = spec.command("spark-submit")
    assert cmd[cmd.index("--reader") + 1] == "batched" and cmd[cmd.index("--read-tasks") + 1] == "3"
    assert cmd[:3] == ["spark-submit", "--master", "local[*]"]
    jars = cmd[cmd.index("--jars") + 1].split(",")
    names = sorted(Path(j).name for j in jars)
    assert names == sorted([f"spark-sql-kafka-0-10_2.13-{versions.SPARK_KAFKA_VERSION}.jar",
                            f"spark-token-provider-kafka-0-10_2.13-{versions.SPARK_TOKEN_PROVIDER_VERSION}.jar",
                            f"kafka-clients-{versions.SPARK_KAFKA_CLIENTS_VERSION}.jar",
                            f"commons-pool2-{versions.SPARK_COMMONS_POOL2_VERSION}.jar"])
    assert cmd[cmd.index("--py-files") + 1].endswith("spark_apps/parity_common.py")
    assert cmd[cmd.index("--py-files") + 2].endswith("spark_apps/record_parity.py")
    # Secrets travel in a private file, never on the command line.
    assert "secret-value" not in " ".join(cmd)
    opts = Path(cmd[cmd.index("--kafka-options-file") + 1])
    assert stat.S_IMODE(os.stat(opts).st_mode) == 0o600 and "secret-value" in opts.read_text()
    # beside the Java options, the librdkafka config the batched reader uses (its settings only: no logger)
    assert json.loads(opts.read_text()) == {"source": {"sasl.jaas.config": "secret-value"},
                                            "source_rdkafka": {"sasl.password": "rd-secret"}}
    assert "rd-secret" not in " ".join(cmd)
    # … and does not outlive the job among its outputs: every runner forgets it once the job has run.
    assert spec.secret_files == [opts]
    spec.forget_secrets()
    assert not opts.exists()
    kwargs = spec.operator_kwargs()
    assert kwargs["application"].endswith("record_parity.py") and kwargs["jars"] == ",".join(jars)


def test_exclusions_reach_the_generated_pom():
    pom = maven._pom(versions.spark_kafka_coordinates(), versions.spark_kafka_exclusions())
    dep = pom.split("<artifactId>spark-sql-kafka-0-10_2.13</artifactId>")[1].split("</dependency>")[0]
    assert "<artifactId>spark-token-provider-kafka-0-10_2.13</artifactId>" in dep
    assert ("<artifactId>spark-token-provider-kafka-0-10_2.13</artifactId>"
            f"<version>{versions.SPARK_TOKEN_PROVIDER_VERSION}</version>") in pom
    assert "<exclusions>" not in maven._pom(["g:a:1"])


def test_bad_snapshot_rows_fail_before_any_spark_job():
    with pytest.raises(ValidationError):
        collector.ExpectedOffset(cluster="B", group="g", topic="t", partition=0, expected_offset=-1)
    with pytest.raises(ValidationError):
        collector.GroupBoundary(group="", source_topic="t", source_partition=0, source_committed=0,
                                target_topic="A.t", target_partition=0, target_offset=0)


def test_unchanged_expects_the_offsets_from_before():
    from mirrorbook.kafka.types import TP

    rows = collector.unchanged("B", {"g": {TP("t", 1): 5, TP("t", 0): 3}})
    assert [(r.topic, r.partition, r.expected_offset, r.true_offset) for r in rows] == [("t", 0, 3, None),
                                                                                         ("t", 1, 5, None)]


def test_failure_message_of_a_job_that_could_not_run():
    s = submit.ParitySummary(app="group_parity", status="error", passed=False, error="no column `group`")
    assert s.failure_message() == "group_parity could not run: no column `group`"
    with pytest.raises(submit.SparkJobError):
        s.check()


def test_quick_start_jvm_only_for_small_local_inputs(tmp_path: Path, monkeypatch):
    snap = collector.write_group_snapshot(tmp_path, [collector.ExpectedOffset(
        cluster="B", group="g", topic="t", partition=0, expected_offset=1)], {"B": {}})
    small = submit.group_parity_job(snap, tmp_path / "out")
    assert submit.QUICK_START_JVM in small.driver_java_options and "log4j2.properties" in small.driver_java_options
    remote = submit.group_parity_job(snap, tmp_path / "out", master="spark://spark:7077")
    assert remote.driver_java_options is None and "spark.ui.enabled" not in remote.conf
    whole_topics = submit.record_parity_job("a:1", "b:1", tmp_path / "r", topics={"t": "A.t"}, jars=[])
    assert submit.QUICK_START_JVM not in whole_topics.driver_java_options  # size unknown: C2
    monkeypatch.setattr(submit, "QUICK_START_MAX_ROWS", 0)
    big = submit.group_parity_job(snap, tmp_path / "out")
    assert submit.QUICK_START_JVM not in big.driver_java_options


@pytest.mark.parametrize("master", ["local-cluster[1,1,1024]", "yarn", "k8s://https://kubernetes.default.svc"])
def test_local_only_settings_only_for_local_masters(tmp_path: Path, master: str):
    """LOCAL_CONF, the quick-start JVM flags and this worker's log4j2 file are for a driver in this JVM only."""
    snap = collector.write_group_snapshot(tmp_path, [collector.ExpectedOffset(
        cluster="B", group="g", topic="t", partition=0, expected_offset=1)], {"B": {}})
    spec = submit.group_parity_job(snap, tmp_path / "out", master=master)
    assert not submit.is_local(master) and spec.driver_java_options is None
    assert not set(submit.LOCAL_CONF) & set(spec.conf)
    assert submit.is_local("local[2]") and submit.is_local("local") and submit.is_local("local[*]")


def test_staging_sends_snapshots_to_the_uri_and_secrets_with_the_job(tmp_path: Path):
    """stage() copies the snapshots to <uri>/<key>/snapshot/ and points the job there; the Kafka options
    (a 0600 file holding secrets) are shipped with the job (spark-submit --files), never to the URI."""
    from mirrorbook.parity import staging

    snap = collector.write_record_snapshot(tmp_path / "snap", [collector.RecordRange(
        source_topic="t", source_partition=0, target_topic="A.t", target_partition=0)])
    spec = submit.record_parity_job("a:9092", "b:9092", tmp_path / "out", snapshot=snap, jars=[],
                                    source_options={"sasl.jaas.config": "secret-value"}, master="yarn")
    uri = f"file://{tmp_path / 'shared'}"
    staged = staging.stage(spec, uri, "dag/run/task")
    args = staged.job.application_args
    assert args[args.index("--ranges") + 1] == f"{uri}/dag/run/task/snapshot/ranges.parquet"
    assert args[args.index("--output") + 1] == f"{uri}/dag/run/task/result"
    assert args[args.index("--summary") + 1] == f"{uri}/dag/run/task/summary.json"
    assert args[args.index("--kafka-options-file") + 1] == "kafka-options.json"
    assert staged.job.files == [str(tmp_path / "out" / "kafka-options.json")]
    assert "--files" in staged.job.command() and staged.job.operator_kwargs()["files"] == staged.job.files[0]
    shared = sorted(p.relative_to(tmp_path / "shared").as_posix()
                    for p in (tmp_path / "shared").rglob("*") if p.is_file())
    assert shared == ["dag/run/task/snapshot/ranges.parquet"]
    assert "secret-value" not in " ".join(staged.job.command())
    with pytest.raises(submit.SparkJobError, match=r"left no summary at file://.*/dag/run/task/summary.json"):
        staging.fetch(staged, "spark-submit exited 2")


@pytest.mark.parametrize("uri, needle", [("nowhere/at/all", "is not a URI"),
                                         ("file:///proc/mirrorbook-parity", "is not writable from this worker")])
def test_a_parity_uri_this_worker_cannot_use_is_refused(uri: str, needle: str):
    from mirrorbook.parity import staging

    with pytest.raises(staging.StagingError, match=needle):
        staging.check(uri)


@pytest.mark.parametrize("shipped, java, reads", [
    (None, {}, True),                                         # plaintext: the bootstrap is all it needs
    (None, {"security.protocol": "PLAINTEXT"}, True),
    (None, {"security.protocol": "SASL_SSL"}, False),         # secured, no librdkafka config: the Kafka source
    ({"security.protocol": "SASL_SSL", "sasl.password": "p"}, {"security.protocol": "SASL_SSL"}, True),
])
def test_the_batched_reader_gets_the_shipped_librdkafka_config_or_none(tmp_path: Path, shipped, java, reads):
    from mirrorbook.parity import connect

    app = connect.load_app(APPS / "record_parity.py")
    opts = tmp_path / "opts.json"
    opts.write_text(json.dumps({"source": java, **({"source_rdkafka": shipped} if shipped else {})}))
    args = app.parse_args(["--source-bootstrap", "a:9092", "--target-bootstrap", "b:9092", "--topic", "t=A.t",
                           "--kafka-options-file", str(opts), "--output", "/x", "--summary", "/x/s.json"])
    assert args.reader == "batched"
    conf = app.rdkafka_config(args, "source", app.kafka_options(args, "source"))
    if not reads:
        assert conf is None
        return
    assert conf == {**(shipped or {}), "bootstrap.servers": "a:9092", "fetch.wait.max.ms": "10"}


def test_ranges_are_spread_over_the_tasks_by_their_records():
    from mirrorbook.parity import connect

    app = connect.load_app(APPS / "record_parity.py")
    units = [("t", p, 0, n) for p, n in enumerate([100, 10, 10, 80, 20, 5])]
    groups = app.spread(units, 2)
    assert sorted(sum(u[3] for u in g) for g in groups) == [110, 115]  # largest first, to the least loaded
    assert sorted(u for g in groups for u in g) == sorted(units)
    assert len(app.spread(units, 100)) == len(units) and len(app.spread(units, 1)) == 1
