"""Building and running the spark-submit of a parity app, and reading its verdict.

`group_parity_job` / `record_parity_job` describe a submission as a `SparkSubmitSpec` whose fields are
SparkSubmitOperator's arguments (the Airflow glue passes `spec.operator_kwargs()`); `spec.command()`
is the equivalent command line. `run` executes it locally with the venv's spark-submit and returns the
app's JSON summary as a `ParitySummary`, whose `failure_message()` names the failing groups and
partitions and whose `check()` raises on failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping

import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field

from mirrorbook.errors import MirrorbookError, Verdict
from mirrorbook.maven import spark_kafka_libs
from mirrorbook.parity.collector import GroupSnapshot, RecordSnapshot

DEFAULT_MASTER = "local[*]"


def is_local(master: str) -> bool:
    """A master whose driver and executors are this machine's one JVM: `local`, `local[N]`, `local[*]`.
    `local-cluster[...]` starts executors of its own, as a cluster does: not local."""
    return master == "local" or master.startswith("local[")


# Local runs: no UI server, no progress bars on stderr, few shuffle partitions (AQE coalesces the rest).
LOCAL_CONF = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
              "spark.sql.shuffle.partitions": "8"}
# Most parity runs are short-lived local JVMs judging small snapshots: C1-only JIT and the serial GC
# start them faster. Large inputs need C2's compiled code. Measured with group_parity on local[2]
# (2 busy cores): tiny snapshot 40s -> 25s, 1M rows 50s -> 37s with these flags, but 10M rows
# 124s -> 331s. So they are used up to QUICK_START_MAX_ROWS input rows, when the row count is known.
QUICK_START_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
QUICK_START_MAX_ROWS = 2_000_000
LISTED_IN_MESSAGE = 20


class SparkJobError(MirrorbookError):
    """The parity job did not produce a verdict (Spark missing, crash, bad input)."""


class ParityFailed(Verdict):
    """The parity job ran and found offsets or records that are not where they must be."""

    def __init__(self, summary: "ParitySummary") -> None:
        super().__init__(summary.failure_message(), f"the classified rows are in {summary.output}")
        self.summary = summary


def apps_dir() -> Path:
    """The Spark apps: inside the installed package (a wheel), else spark_apps/ of the checkout an editable
    install points to — the same files either way, run by spark-submit as they are."""
    package = Path(__file__).resolve().parents[1]
    candidates = (package / "spark_apps", package.parents[1] / "spark_apps")
    for path in candidates:
        if (path / "parity_common.py").is_file():
            return path
    raise SparkJobError(f"The Spark parity apps are not where mirrorbook installs them ({candidates[0]})",
                        "reinstall mirrorbook from its wheel (the apps ship in it as mirrorbook/spark_apps)")


# -- the submission -------------------------------------------------------------------------------------
class SparkSubmitSpec(BaseModel):
    """One spark-submit. Field names follow SparkSubmitOperator (which takes the master from its connection)."""

    application: str
    application_args: list[str]
    name: str
    master: str = DEFAULT_MASTER
    jars: list[str] = Field(default_factory=list)
    py_files: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)  # spark-submit --files: shipped beside the driver
    conf: dict[str, str] = Field(default_factory=dict)
    driver_memory: str | None = None
    driver_java_options: str | None = None
    summary_path: Path
    output_dir: Path
    # 0600 files that carry client secrets to the job (its Kafka options file): removed once the job has run,
    # so no secret stays among its outputs (`forget_secrets`; every runner calls it, however the job ended).
    secret_files: list[Path] = Field(default_factory=list)

    def forget_secrets(self) -> None:
        for path in self.secret_files:
            path.unlink(missing_ok=True)

    def command(self, spark_submit: str = "spark-submit") -> list[str]:
        cmd = [spark_submit, "--master", self.master, "--name", self.name]
        for k, v in sorted(self.conf.items()):
            cmd += ["--conf", f"{k}={v}"]
        if self.driver_memory:
            cmd += ["--driver-memory", self.driver_memory]
        if self.driver_java_options:
            cmd += ["--driver-java-options", self.driver_java_options]
        if self.jars:
            cmd += ["--jars", ",".join(self.jars)]
        if self.py_files:
            cmd += ["--py-files", ",".join(self.py_files)]
        if self.files:
            cmd += ["--files", ",".join(self.files)]
        return cmd + [self.application, *self.application_args]

    def operator_kwargs(self) -> dict[str, Any]:
        """Arguments for airflow's SparkSubmitOperator (the master comes from its Spark connection)."""
        return {"application": self.application, "application_args": self.application_args, "name": self.name,
                "conf": self.conf, "jars": ",".join(self.jars) or None, "py_files": ",".join(self.py_files) or None,
                "files": ",".join(self.files) or None, "driver_memory": self.driver_memory}


def _spec(app: str, args: list[str], out_dir: Path, *, master: str, jars: list[str] | None = None,
          conf: Mapping[str, str] | None = None, driver_memory: str | None = None,
          jvm_options: str | None = None, input_rows: int | None = None) -> SparkSubmitSpec:
    apps = apps_dir()
    out_dir = Path(out_dir)
    summary = out_dir / "summary.json"
    local = is_local(master)  # the quick-start JVM, LOCAL_CONF and a path of this worker: only for this JVM
    if jvm_options is None:
        small = input_rows is not None and input_rows <= QUICK_START_MAX_ROWS
        jvm_options = QUICK_START_JVM if local and small else ""
    java_options = " ".join(filter(None, [jvm_options, f"-Dlog4j2.configurationFile=file:{apps / 'log4j2.properties'}"
                                          if local else ""]))
    return SparkSubmitSpec(
        application=str(apps / f"{app}.py"),
        application_args=[*args, "--output", str(out_dir / "result"), "--summary", str(summary)],
        name=f"mirrorbook-{app}", master=master, jars=jars or [], py_files=[str(apps / "parity_common.py")],
        conf={**(LOCAL_CONF if local else {}), **(conf or {})}, driver_memory=driver_memory,
        driver_java_options=java_options or None,
        summary_path=summary, output_dir=out_dir)


def group_parity_job(snapshot: GroupSnapshot, out_dir: str | Path, *, max_reread: int | None = None,
                     fail_unexpected: bool = False, scope_group_regex: str | None = None, as_written: bool = False,
                     master: str = DEFAULT_MASTER, conf: Mapping[str, str] | None = None,
                     driver_memory: str | None = None, jvm_options: str | None = None) -> SparkSubmitSpec:
    args = ["--expected", str(snapshot.expected), "--actual", str(snapshot.actual)]
    if snapshot.watermarks:
        args += ["--watermarks", str(snapshot.watermarks)]
    if max_reread is not None:
        args += ["--max-reread", str(max_reread)]
    if fail_unexpected:
        args.append("--fail-unexpected")
    if as_written:
        args.append("--as-written")
    if scope_group_regex:
        args += ["--scope-group-regex", scope_group_regex]
    rows = sum(_parquet_rows(p) for p in (snapshot.expected, snapshot.actual))
    return _spec("group_parity", args, Path(out_dir), master=master, conf=conf, driver_memory=driver_memory,
                 jvm_options=jvm_options, input_rows=rows)


def spark_kafka_jars() -> list[str]:
    """Spark's Kafka source and its runtime deps from the Maven cache (fetched once)."""
    return sorted(str(p) for p in spark_kafka_libs().glob("*.jar"))


def record_parity_job(source_bootstrap: str, target_bootstrap: str, out_dir: str | Path, *,
                      snapshot: RecordSnapshot | None = None, topics: Mapping[str, str] | None = None,
                      checksums_only: bool = False, max_reread: int | None = None,
                      source_options: Mapping[str, str] | None = None,
                      target_options: Mapping[str, str] | None = None,
                      source_rdkafka: Mapping[str, Any] | None = None, target_rdkafka: Mapping[str, Any] | None = None,
                      reader: str | None = None, read_tasks: int | None = None, master: str = DEFAULT_MASTER,
                      jars: list[str] | None = None, conf: Mapping[str, str] | None = None,
                      driver_memory: str | None = None, jvm_options: str | None = None) -> SparkSubmitSpec:
    """`topics` maps source → target topic for whole-topic comparison; `snapshot` gives ranges/boundaries.

    `source_options`/`target_options` are the Java client options of Spark's Kafka source
    (`mirrorbook.kafka.config.java_client_options`); `source_rdkafka`/`target_rdkafka` the librdkafka configs they
    come from, which the batched reader uses (a secured side without one is read by the Kafka source). `reader`:
    the app's --reader (None: its default); `read_tasks`: --read-tasks. All client settings (security settings,
    SASL secrets) go to a 0600 JSON file, never onto the command line.
    """
    if snapshot is None and not topics:
        raise ValueError("record parity needs a RecordSnapshot (ranges) or topics to compare")
    out_dir = Path(out_dir)
    args = ["--source-bootstrap", source_bootstrap, "--target-bootstrap", target_bootstrap]
    if snapshot is not None:
        args += ["--ranges", str(snapshot.ranges)]
        if snapshot.boundaries:
            args += ["--boundaries", str(snapshot.boundaries)]
    for src, tgt in sorted((topics or {}).items()):
        args += ["--topic", f"{src}={tgt}"]
    if checksums_only:
        args.append("--checksums-only")
    if max_reread is not None:
        args += ["--max-reread", str(max_reread)]
    if reader is not None:
        args += ["--reader", reader]
    if read_tasks is not None:
        args += ["--read-tasks", str(read_tasks)]
    content = {"source": dict(source_options or {}), "target": dict(target_options or {}),
               "source_rdkafka": _plain(source_rdkafka), "target_rdkafka": _plain(target_rdkafka)}
    secret = _options_file(out_dir, {k: v for k, v in content.items() if v}) \
        if any(content.values()) else None
    if secret is not None:
        args += ["--kafka-options-file", str(secret)]
    spec = _spec("record_parity", args, out_dir, master=master,
                 jars=spark_kafka_jars() if jars is None else jars, conf=conf, driver_memory=driver_memory,
                 jvm_options=jvm_options, input_rows=_range_records(snapshot) if not topics else None)
    return spec.model_copy(update={"secret_files": [secret]}) if secret is not None else spec


def _parquet_rows(path: Path) -> int:
    return pq.ParquetFile(path).metadata.num_rows


def _range_records(snapshot: RecordSnapshot | None) -> int | None:
    """Records the ranges span on both sides, or None when a range is open-ended (size unknown)."""
    if snapshot is None:
        return None
    ranges = pq.read_table(snapshot.ranges).to_pylist()
    total = 0
    for r in ranges:
        for side in ("source", "target"):
            if r[f"{side}_end"] is None:
                return None
            total += r[f"{side}_end"] - (r[f"{side}_start"] or 0)
    return total


def _plain(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """A librdkafka config as the app can be given it: its settings, not the objects a client is also handed
    (a logger, callbacks), which neither travel in JSON nor mean anything to another process."""
    return {k: v for k, v in (config or {}).items() if isinstance(v, (str, int, float, bool))}


def _options_file(out_dir: Path, content: Mapping[str, Mapping[str, Any]]) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "kafka-options.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(dict(content), fh)
    return path


# -- the verdict ---------------------------------------------------------------------------------------
class ParityFailureRow(BaseModel):
    """One failing row as the app reported it; the row's own columns are kept as extra fields."""

    model_config = ConfigDict(extra="allow")
    check: str            # group-offset | pair | record | boundary
    label: str            # e.g. "B group orders-app A.orders-1"
    reason: str           # e.g. "SKIP 7 (committed 267, true offset 260)"
    group: str | None = None
    cluster: str | None = None
    topic: str | None = None
    partition: int | None = None


class ParitySummary(BaseModel):
    """The app's JSON summary (plus how the process ended). Unknown keys are kept."""

    model_config = ConfigDict(extra="allow")
    app: str
    status: str           # passed | failed | error
    passed: bool
    error: str | None = None
    output: str | None = None
    outputs: dict[str, str] = Field(default_factory=dict)
    counts: dict[str, int] = Field(default_factory=dict)
    totals: dict[str, int] = Field(default_factory=dict)
    failures: list[ParityFailureRow] = Field(default_factory=list)
    failures_total: int = 0
    elapsed_s: float | None = None
    exit_code: int | None = None
    log: str | None = None

    def failing_groups(self) -> list[str]:
        return sorted({f.group for f in self.failures if f.group})

    def failure_message(self, limit: int = LISTED_IN_MESSAGE) -> str:
        if self.status == "error":
            return f"{self.app} could not run: {self.error}"
        if self.passed:
            return f"{self.app} passed"
        head = f"{self.app} failed: {self.failures_total} failing row(s)"
        groups = self.failing_groups()
        if groups:
            head += f" in group(s) {', '.join(groups)}"
        lines = [f"  {f.label}: {f.reason}" for f in self.failures[:limit]]
        if self.failures_total > len(lines):
            lines.append(f"  ... and {self.failures_total - len(lines)} more (see {self.output})")
        return "\n".join([head, *lines])

    def check(self) -> "ParitySummary":
        """Return self when passed; raise ParityFailed / SparkJobError otherwise."""
        if self.status == "error":
            raise SparkJobError(self.failure_message(), f"read {self.log}" if self.log else None)
        if not self.passed:
            raise ParityFailed(self)
        return self


def spark_submit_path() -> str:
    """The spark-submit of the running venv (pyspark's), else the one on PATH."""
    beside = Path(sys.executable).parent / "spark-submit"
    found = str(beside) if beside.is_file() else shutil.which("spark-submit")
    if not found:
        raise SparkJobError("spark-submit was not found (neither beside this Python nor on PATH)",
                            "pip install pyspark==4.3.0 into this venv, or put a Spark distribution's bin/ on PATH")
    return found


def local_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """pip's pyspark finds its SPARK_HOME through `python3` on PATH, which may not be this venv's."""
    env = dict(os.environ if base is None else base)
    for mark in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE"):  # a Connect client's marks: never a submit's
        env.pop(mark, None)
    if "SPARK_HOME" not in env:
        try:
            import pyspark
            env["SPARK_HOME"] = str(Path(pyspark.__file__).parent)
        except ImportError:
            pass
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    venv_bin = Path(sys.executable).parent
    if not shutil.which("spark-submit", path=env.get("PATH")) and (venv_bin / "spark-submit").is_file():
        # an un-activated venv (airflow started by its full path): spark-submit is only beside Python
        env["PATH"] = os.pathsep.join(p for p in (str(venv_bin), env.get("PATH")) if p)
    return env


def execute(spec: SparkSubmitSpec, *, timeout_s: float | None = 1800, spark_submit: str | None = None,
            env: Mapping[str, str] | None = None) -> tuple[int, Path]:
    """Run the spark-submit of `spec` on this machine: (its exit code, its log)."""
    spec.output_dir.mkdir(parents=True, exist_ok=True)
    log = spec.output_dir / "spark-submit.log"
    cmd = spec.command(spark_submit or spark_submit_path())
    with open(log, "w") as fh:
        try:
            proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=local_env(env), timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise SparkJobError(f"{spec.name} did not finish within {timeout_s:.0f}s", f"read {log}") from exc
        finally:
            spec.forget_secrets()
    return proc.returncode, log


def run(spec: SparkSubmitSpec, *, timeout_s: float | None = 1800, spark_submit: str | None = None,
        env: Mapping[str, str] | None = None) -> ParitySummary:
    """Run the job locally; return its summary (passed or failed). Raise SparkJobError if it gave none."""
    spec.summary_path.unlink(missing_ok=True)  # a stale summary must never pass for this run's verdict
    code, log = execute(spec, timeout_s=timeout_s, spark_submit=spark_submit, env=env)
    if not spec.summary_path.is_file():
        raise SparkJobError(f"{spec.name} exited {code} without a summary:\n{_tail(log)}", f"read {log}")
    summary = ParitySummary.model_validate_json(spec.summary_path.read_text())
    return summary.model_copy(update={"exit_code": code, "log": str(log)})


def _tail(path: Path, lines: int = 15) -> str:
    kept = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    return "\n".join("    " + ln for ln in kept[-lines:])
