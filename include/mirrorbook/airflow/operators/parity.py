"""Parity after every mutating step: snapshots collected by the library, judged by the Spark apps
through the Spark provider's SparkSubmitHook (master from the `spark_default` connection).

`ParitySparkSubmitOperator` collects the snapshot its `check` needs, submits the app, then reads the
app's JSON summary: the verdict goes to the audit store, and a
failed parity fails the task naming the groups and partitions. `parity=off` (a DAG parameter)
skips the job — the step's own read-back still verifies, without Spark.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowException, AirflowNotFoundException

from mirrorbook.airflow.hooks.mirrorbook import MirrorbookHook
from mirrorbook.airflow.operators.base import MirrorbookBaseOperator, guarded
from mirrorbook.kafka.config import java_client_options
from mirrorbook.parity import ParitySummary, SparkSubmitSpec, group_parity_job, record_parity_job, write_record_snapshot
from mirrorbook.parity import connect, engine, staging, submit
from mirrorbook import settings
from mirrorbook.runbooks import parity
from mirrorbook.core.engine import Runbook
from mirrorbook.runbooks.move import load_plan, move_for
from mirrorbook.topology import FlowSpec, Topology

# What spark-submit needs from this venv: pip's pyspark, this Python, and PATH where it finds spark-submit.
SUBMIT_ENV = ("PATH", "SPARK_HOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "JAVA_HOME")
CHECKS = ("unchanged", "offsets", "move")


class CaptureGroupOffsetsOperator(MirrorbookBaseOperator):
    """Before a connector change: where the flow's managed groups are committed, on both clusters."""

    def execute(self, context: Any) -> dict[str, Any]:
        params = self.runbook_params(context)
        rb = self.runbook(context)
        topology = self.hook.topology
        flow = params.flow_spec
        with rb.step("parity.capture", flow.name) as step:
            if params.parity == "off" or rb.dry_run:
                step.note(reason="parity off" if params.parity == "off" else "dry run")
            else:
                step.settle({"groups": parity.capture_groups(rb, self.hook.clients, topology, flow)})
        return self.log_outcomes(rb)


class WarmProofOperator(MirrorbookBaseOperator):
    """Beside precheck: a trivial query on the Spark Connect server, so that its JIT and query planning
    are warm when the proofs need a verdict (a cold server's first answer takes seconds more). Never
    fails the run: a cold or missing server only costs time later, and the proof says so then."""

    deadline_s = 120.0

    def execute(self, context: Any) -> dict[str, Any]:
        params = self.runbook_params(context)
        if params.parity == "off" or getattr(params, "dry_run", False):
            return {"skipped": "no proof in this run"}
        conn_id = connect_choice(params, self.hook.topology).conn_id
        url = spark_connect_url(conn_id)
        if url is None:
            return {"skipped": f"no {conn_id!r} connection: the proofs run by spark-submit"}
        try:
            seconds, what = self._warm(params, url)
        except Exception as exc:  # noqa: BLE001 — warming is an optimisation, never a gate
            self.log.warning("could not warm the Spark Connect server: %s",
                             str(exc).splitlines()[0] if str(exc) else exc)
            return {"warmed": False}
        self.log.info("Spark Connect server warmed on %s in %.2fs", what, seconds)
        return {"warmed": True, "seconds": round(seconds, 3), "on": what}

    def _warm(self, params: Any, url: str) -> tuple[float, str]:
        """A planned move's proofs: warm their very paths — the record proof reading both clusters on a few
        records, the group proof on a one-row snapshot (verdicts thrown away); the server plans and
        compiles what the proofs that count will ask. Otherwise, or with nothing replicated yet, a trivial
        query."""
        started = time.monotonic()
        if getattr(params, "mode", "planned") == "planned":
            via = move_for(params, self.hook.topology).via
            ranges = parity.warm_ranges(self.hook.clients, via)
            if ranges:
                with tempfile.TemporaryDirectory(prefix="mirrorbook-warm-") as tmp:
                    connect.run(record_job(self.hook.clients, via, Path(tmp) / "record", ranges), url)
                    connect.run(group_parity_job(parity.warm_group_snapshot(Path(tmp) / "group", via),
                                                 Path(tmp) / "group", as_written=True), url)
                r = ranges[0]
                return (time.monotonic() - started,
                        f"the record proof of {r.source_topic}-{r.source_partition} "
                        f"-> {r.target_topic}-{r.target_partition}"
                        " and the group proof")
        return connect.warm(url), "a trivial query"


class ParitySparkSubmitOperator(MirrorbookBaseOperator):
    """Run one parity app and record its verdict, where `mirrorbook.parity.engine` chooses (its table).

    On a Spark Connect server the app's code runs in this task as a client of that server
    (`mirrorbook.parity.connect`): snapshots go up as Arrow tables, results come back — no disk shared with
    the server, no JVM started here. By spark-submit, with a Spark connection (`spark_default`, or
    `MIRRORBOOK_SPARK_CONN_ID`) the job goes through the Spark provider's `SparkSubmitHook`, configured
    through its public arguments only; what the spark-submit process needs from this venv reaches it through
    `env_vars` (that subprocess's environment), never through this worker's `os.environ`. Without the
    connection the job runs on this worker with the venv's spark-submit and master local[*]
    (`mirrorbook.parity.submit.execute`). The job is built for its master: local-only settings (LOCAL_CONF,
    the quick-start JVM flags, the log4j2 file of this worker) only for a local one. With
    `MIRRORBOOK_PARITY_URI` set, a spark-submit's snapshots, results and summary go through that URI
    (`mirrorbook.parity.staging`), so a cluster's driver reads and writes nothing of this worker's disk; a
    non-local master without it is refused at validate_params (`check_proof_engine`)."""

    deadline_s = 3600.0

    def __init__(self, *, check: str, app: str = "group_parity", conn_id: str | None = None,
                 **kwargs: Any) -> None:
        if check not in CHECKS:
            raise ValueError(f"check must be one of {CHECKS}")
        super().__init__(**kwargs)
        # None: the `spark_conn_id` setting, read when the task runs (mirrorbook.settings)
        self.check, self.app, self.conn_id = check, app, conn_id
        self._submitting: SparkSubmitHook | None = None  # the running submission, for on_kill

    @property
    def spark_conn_id(self) -> str:
        return self.conn_id or settings.SPARK_CONN_ID.get() or "spark_default"

    def execute(self, context: Any) -> Any:
        params = self.runbook_params(context)
        rb = self.runbook(context)
        flow = params.flow_spec
        reason = self._skip_reason(rb, params)
        if reason:
            with rb.step(f"parity.{self.app}", flow.name) as step:
                step.note(skipped=reason)
            self.log.info("parity not run: %s", reason)
            return {"skipped": reason}
        where = proof_engine(params, self.hook.topology, self.spark_conn_id)
        spec = guarded(lambda: self._spec(rb, self.hook, flow, params, where.master))
        if spec is None:
            with rb.step(f"parity.{self.app}", flow.name) as step:
                step.note(skipped="nothing to verify: the flow has no managed consumer groups")
            return {"skipped": "no managed groups"}
        summary = guarded(lambda: self.run_job(spec, where.url, where.uri, parity.workdir_key(rb, self.task_id)))
        guarded(lambda: parity.record_verdict(rb, flow.name, summary, self.check, where.describe()))
        return {"app": summary.app, "status": summary.status, "counts": summary.counts,
                "failures_total": summary.failures_total, "output": summary.output}

    def on_kill(self) -> None:
        if self._submitting is not None:
            self._submitting.on_kill()

    def run_job(self, spec: SparkSubmitSpec, url: str | None, uri: str | None, key: str) -> ParitySummary:
        """The app's summary, however it ended; SparkJobError when it left none (or contradicts its exit).
        `url`: the Spark Connect server to run on, None for spark-submit; `uri`: MIRRORBOOK_PARITY_URI, through
        which a spark-submit's files go (`mirrorbook.parity.staging`; `key` names this task's place there). The
        job's secret files (its Kafka options) are gone when it returns."""
        try:
            return self._run_job(spec, url, uri, key)
        finally:
            spec.forget_secrets()

    def _run_job(self, spec: SparkSubmitSpec, url: str | None, uri: str | None, key: str) -> ParitySummary:
        if url is not None:
            self.log.info("running %s on the Spark Connect server %s", spec.name, url.split(";")[0])
            return connect.run(spec, url)
        staged = staging.stage(spec, uri, key) if uri else None
        if staged is not None:
            self.log.info("%s staged through %s", spec.name, staged.base)
        spec.summary_path.unlink(missing_ok=True)  # a stale summary must never pass for this run's verdict
        ended = self._spark_submit(staged.job if staged else spec)
        if staged is not None:
            summary = staging.fetch(staged, ended)
        elif spec.summary_path.is_file():
            summary = ParitySummary.model_validate_json(spec.summary_path.read_text())
        else:
            raise submit.SparkJobError(f"{spec.name} produced no summary: {ended or 'spark-submit exited 0'}",
                                       "see the spark-submit output above")
        if ended is not None and summary.passed:
            raise submit.SparkJobError(f"{spec.name} wrote a passing summary but spark-submit failed: {ended}",
                                       "see the spark-submit output above")
        return summary

    def _spark_submit(self, job: SparkSubmitSpec) -> str | None:
        """Run the spark-submit; how it failed (the apps exit non-zero on a failed parity, and their summary
        says why), or None when it exited 0."""
        try:
            BaseHook.get_connection(self.spark_conn_id)
        except AirflowNotFoundException:
            self.log.warning("no %r connection: running %s with master local[*] on this worker "
                             "(create the connection to submit to a cluster)", self.spark_conn_id, job.name)
            code, log = submit.execute(job, timeout_s=None)
            return f"spark-submit exited {code} (log {log})" if code else None
        kw = job.operator_kwargs()
        conf = dict(kw["conf"] or {})
        if job.driver_java_options:
            conf["spark.driver.extraJavaOptions"] = job.driver_java_options
        env = submit.local_env()
        self._submitting = SparkSubmitHook(
            conn_id=self.spark_conn_id, conf=conf, jars=kw["jars"], py_files=kw["py_files"], files=kw["files"],
            name=kw["name"], application_args=kw["application_args"], driver_memory=kw["driver_memory"],
            env_vars={k: env[k] for k in SUBMIT_ENV if k in env})
        try:
            self._submitting.submit(kw["application"])
        except AirflowException as exc:  # kept, and raised with the summary's word on it (see run_job)
            return str(exc)
        finally:
            self._submitting = None
        return None

    def _skip_reason(self, rb: Runbook, params: Any) -> str | None:
        if params.parity == "off":
            return "parity=off"
        if rb.dry_run:
            return "dry run: nothing changed"
        if getattr(params, "action", None) == "list":
            return "action=list changes nothing"
        if self.app == "record_parity" and params.mode == "unplanned":
            return "unplanned: the source cluster cannot be read"
        return None

    def _spec(self, rb: Runbook, hook: MirrorbookHook, flow: FlowSpec, params: Any,
              master: str) -> SparkSubmitSpec | None:
        out = parity.workdir(rb, self.task_id)
        clients = hook.clients
        if self.check in ("unchanged", "offsets"):
            expected = parity.unchanged_expectation(rb)
            extra: dict = {}
            if self.check == "offsets":
                rows, extra = parity.connector_expectation(rb)
                expected += rows
            if not expected:
                return None
            return group_parity_job(parity.group_snapshot(clients, out / "snapshot", expected, extra), out,
                                    master=master)
        plan = load_plan(rb, rows=False)
        if self.app == "group_parity":
            # What the plan wrote is no proof of where a group should be: this job only checks that it is
            # still committed as written; the record proof establishes the truth from both clusters.
            return group_parity_job(parity.group_snapshot(clients, out / "snapshot", parity.move_expectation(plan)),
                                    out, as_written=True, master=master)
        via = move_for(params, hook.topology).via
        ranges, boundaries = parity.move_records(clients, plan, via)
        return record_job(clients, via, out, ranges, boundaries, master=master)


def record_job(clients: Any, via: FlowSpec, out: Path, ranges: list[Any], boundaries: tuple | list = (),
               master: str = submit.DEFAULT_MASTER) -> SparkSubmitSpec:
    """The record proof of `ranges` on `via`'s two clusters (client secrets in the spec's 0600 options file: the
    Kafka source's Java options and the batched reader's librdkafka config)."""
    snap = write_record_snapshot(out / "snapshot", ranges, boundaries)
    src, dst = clients.kafka_config(via.source), clients.kafka_config(via.target)
    return record_parity_job(src["bootstrap.servers"], dst["bootstrap.servers"], out, snapshot=snap, master=master,
                             source_options=java_client_options(src), target_options=java_client_options(dst),
                             source_rdkafka=src, target_rdkafka=dst)


def connect_choice(params: Any, topology: Topology) -> engine.ConnectChoice:
    """The Spark Connect connection of this run's proofs (`mirrorbook.parity.engine.connect_choice`), the
    default read from the settings now."""
    return engine.connect_choice(getattr(params, "spark_connect", None), topology.spark_connect_connection_id,
                                 _spark_connect_conn_id())


def proof_engine(params: Any, topology: Topology, spark_conn_id: str | None = None) -> engine.ProofEngine:
    """Where this run's proofs run: `mirrorbook.parity.engine.choose` over Airflow's connections and the
    settings as they are now. `spark_conn_id`: the Spark connection of spark-submit (default: the setting's)."""
    connect_to = connect_choice(params, topology)
    url = spark_connect_url(connect_to.conn_id)
    if url is not None:  # a server needs neither a Spark connection nor the parity URI: neither is looked up
        return engine.choose(connect_to, url, None, None)
    return engine.choose(connect_to, None, _spark_master(spark_conn_id), staging.parity_uri())


def _spark_connect_conn_id() -> str:
    """When this connection (the Spark provider's `spark_connect` type) exists, the proofs run on that server."""
    return settings.SPARK_CONNECT_CONN_ID.get() or SparkConnectHook.default_conn_name


def spark_connect_url(conn_id: str | None = None) -> str | None:
    """The sc:// URL of the Spark Connect connection `conn_id` (default: the setting's), or None when there is
    none."""
    conn_id = conn_id or _spark_connect_conn_id()
    try:
        BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return None
    return SparkConnectHook(conn_id).get_connection_url()


def _spark_master(conn_id: str | None = None) -> str | None:
    """The master of the Spark connection `conn_id` (default: the `spark_conn_id` setting's), or None when there
    is none."""
    try:
        conn = BaseHook.get_connection(conn_id or settings.SPARK_CONN_ID.get() or "spark_default")
    except AirflowNotFoundException:
        return None
    # Airflow types conn_type optional; a stored connection always has one (this lookup is for a Spark connection).
    return engine.submit_master(conn.conn_type or "spark", conn.host, conn.port)


def spark_submit_master(conn_id: str | None = None) -> str:
    """The master spark-submit would use: the Spark connection's (default: the `spark_conn_id` setting's), as the
    provider reads it, else ours (the operator runs locally without the connection)."""
    return _spark_master(conn_id) or submit.DEFAULT_MASTER


def check_proof_engine(params: Any, topology: Topology) -> None:
    """Refuse, before anything changes, a run whose proofs could not run (`mirrorbook.parity.engine`'s table:
    a named Spark Connect connection that does not exist, a non-local master without MIRRORBOOK_PARITY_URI, a
    parity URI this worker cannot write to)."""
    if getattr(params, "parity", "off") == "off" or getattr(params, "dry_run", False):
        return
    proof_engine(params, topology).check()
