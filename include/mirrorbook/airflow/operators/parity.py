"""Parity after every mutating step: snapshots collected by the library, judged by the Spark apps
through the Spark provider's own SparkSubmitOperator (master from the `spark_default` connection).

`ParitySparkSubmitOperator` collects the snapshot its `check` needs, points SparkSubmitOperator at
the app, runs it, then reads the app's JSON summary: the verdict goes to the audit store, and a
failed parity fails the task naming the groups and partitions. `parity=off` (a DAG parameter)
skips the job — the step's own read-back still verifies, without Spark.
"""

from __future__ import annotations

import json
import os
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowException, AirflowNotFoundException

from mirrorbook.airflow.hooks.mirrorbook import MirrorbookHook
from mirrorbook.airflow.operators.base import MirrorbookBaseOperator, RunbookTask, guarded
from mirrorbook.kafka.config import java_client_options
from mirrorbook.parity import ParitySummary, SparkSubmitSpec, group_parity_job, record_parity_job, write_record_snapshot
from mirrorbook.parity.submit import local_env
from mirrorbook.runbooks import parity
from mirrorbook.runbooks.engine import Runbook
from mirrorbook.runbooks.move import load_plan, move_for
from mirrorbook.topology import FlowSpec

SPARK_CONN_ID = os.environ.get("MIRRORBOOK_SPARK_CONN_ID", "spark_default")
LOCAL_MASTER = {"conn_type": "spark", "host": "local[*]"}
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


class ParitySparkSubmitOperator(RunbookTask, SparkSubmitOperator):
    deadline_s = 3600.0

    def __init__(self, *, check: str, app: str = "group_parity", conn_id: str = SPARK_CONN_ID,
                 **kwargs: Any) -> None:
        if check not in CHECKS:
            raise ValueError(f"check must be one of {CHECKS}")
        super().__init__(application="", conn_id=conn_id, name=f"mirrorbook-{app}", **kwargs)
        self.check, self.app = check, app

    def execute(self, context: Any) -> Any:
        hook = self.hook
        params = self.runbook_params(context)
        rb = self.runbook(context)
        flow = params.flow_spec
        reason = self._skip_reason(rb, params)
        if reason:
            with rb.step(f"parity.{self.app}", flow.name) as step:
                step.note(skipped=reason)
            self.log.info("parity not run: %s", reason)
            return {"skipped": reason}
        spec = guarded(lambda: self._spec(rb, hook, flow, params))
        if spec is None:
            with rb.step(f"parity.{self.app}", flow.name) as step:
                step.note(skipped="nothing to verify: the flow has no managed consumer groups")
            return {"skipped": "no managed groups"}
        self._point_at(spec)
        self._out_of_the_box()
        try:
            super().execute(context)
        except AirflowException as exc:  # the apps exit non-zero on a failed parity; the summary says why
            self.log.info("spark-submit ended: %s", exc)
        if not spec.summary_path.is_file():
            raise AirflowException(f"{spec.name} produced no summary (see the spark-submit output above)")
        summary = ParitySummary.model_validate_json(spec.summary_path.read_text())
        guarded(lambda: parity.record_verdict(rb, flow.name, summary, self.check))
        return {"app": summary.app, "status": summary.status, "counts": summary.counts,
                "failures_total": summary.failures_total, "output": summary.output}

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

    def _spec(self, rb: Runbook, hook: MirrorbookHook, flow: FlowSpec, params: Any) -> SparkSubmitSpec | None:
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
            return group_parity_job(parity.group_snapshot(clients, out / "snapshot", expected, extra), out)
        plan = load_plan(rb)
        via = move_for(params, hook.topology).via
        if self.app == "group_parity":
            return group_parity_job(parity.group_snapshot(clients, out / "snapshot",
                                                          parity.move_expectation(plan, via)), out)
        ranges, boundaries = parity.move_records(clients, plan, via)
        snap = write_record_snapshot(out / "snapshot", ranges, boundaries)
        src, dst = clients.kafka_config(via.source), clients.kafka_config(via.target)
        return record_parity_job(src["bootstrap.servers"], dst["bootstrap.servers"], out, snapshot=snap,
                                 source_options=java_client_options(src), target_options=java_client_options(dst))

    def _out_of_the_box(self) -> None:
        """Airflow started from an un-activated venv, without a spark_default connection, must still prove.

        spark-submit is looked up on this process's PATH (whatever the master), so the venv's bin joins
        it; without the connection the provider would submit to YARN, mirrorbook's default is local[*].
        Both are set for this task's process only, the connection through Airflow's env-var backend."""
        os.environ["PATH"] = local_env()["PATH"]
        try:
            BaseHook.get_connection(self._conn_id)
        except AirflowNotFoundException:
            self.log.warning("no %r connection: running %s with master local[*] on this worker "
                             "(create the connection to submit to a cluster)", self._conn_id, self.name)
            os.environ[f"AIRFLOW_CONN_{self._conn_id.upper()}"] = json.dumps(LOCAL_MASTER)

    def _point_at(self, spec: SparkSubmitSpec) -> None:
        """SparkSubmitOperator runs whatever these fields say; the master comes from its connection."""
        kw = spec.operator_kwargs()
        self.application, self.application_args, self.name = kw["application"], kw["application_args"], kw["name"]
        self.jars, self.py_files = kw["jars"], kw["py_files"]
        conf = dict(kw["conf"] or {})
        if spec.driver_java_options:
            conf["spark.driver.extraJavaOptions"] = spec.driver_java_options
        self.conf = conf
        self.env_vars = {k: v for k, v in local_env().items()
                         if k in ("SPARK_HOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "JAVA_HOME")}
        self._hook = None
