"""Operators every runbook DAG shares: validate the form, take/release the flow lock, report the run."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from airflow.sdk.configuration import conf as airflow_conf
from airflow.sdk.exceptions import AirflowFailException

from mirrorbook.airflow.operators.base import MirrorbookBaseOperator, guarded, run_info
from mirrorbook.airflow.operators.parity import check_proof_engine
from mirrorbook.audit import AuditStore
from mirrorbook.runbooks import anchors
from mirrorbook.bounds import cut
from mirrorbook.clients import Clients
from mirrorbook.errors import Refused
from mirrorbook.runbooks import lock
from mirrorbook.core.engine import Runbook
from mirrorbook.runbooks.params import FlowParams, FormParams, InvalidParams, check_keys, parse
from mirrorbook.runbooks.registry import preflight
from mirrorbook.runbooks.report import run_report

# Parameters too large to be worth an XCom copy (the audit keeps the validated run's parameters).
NOT_IN_XCOM = {"offsets"}


@dataclass
class _Preflight:
    audit: AuditStore
    clients: Clients
    topology: Any

# Airflow's switch for whether a run's conf reaches its params at all. Off, Airflow drops the conf without a
# word and the run takes the form's defaults — dry_run=false among them.
CONF_OVERRIDES = ("core", "dag_run_conf_overrides_params")


class ValidateParamsOperator(MirrorbookBaseOperator[FormParams]):
    """First task of every runbook: bad input fails here, for good, with a precise message, before any call.

    Every key of the run's parameters must be one the runbook knows (a misspelled `dryrun` is refused,
    never ignored) — the keys of the run's own conf too, as sent, whatever Airflow made of it; sizes are
    checked before anything is parsed; what can be checked up front (the flow, a snapshot to restore, a
    groups pattern that matches nothing, whether the proofs can run where they are configured to) is."""

    deadline_s = 120.0

    def execute(self, context: Any) -> dict[str, Any]:
        raw = context["params"]
        rb = Runbook(run_info(context, self.task_id), self.audit())
        try:
            with rb.step("params.validate", cut(str(raw.get("flow")))) as step:
                step.note(runbook=self.params_model.__name__)
                self._check_conf(getattr(context["dag_run"], "conf", None) or {})
                parsed = parse(self.params_model, raw, self.hook.topology)
                warnings = preflight(parsed, _Preflight(rb.audit, self.hook.clients, self.hook.topology))
                check_proof_engine(parsed, self.hook.topology)
                step.note(params=parsed.model_dump(mode="json", exclude=NOT_IN_XCOM), warnings=warnings)
        except Refused as exc:
            raise AirflowFailException(str(exc)) from exc
        except Exception as exc:  # whatever the input did to a parser: a validation failure, never retried
            raise AirflowFailException(f"the parameters could not be validated: {type(exc).__name__}: "
                                       f"{cut(str(exc))}") from exc
        for w in warnings:
            self.log.warning("%s", w)
        self.log.info("parameters OK: %s", parsed.model_dump(exclude=NOT_IN_XCOM))
        return {**parsed.model_dump(mode="json", exclude=NOT_IN_XCOM), "warnings": warnings}

    def _check_conf(self, conf: Any) -> None:
        """The run's conf as sent: its keys are the runbook's, and Airflow lets it reach the params at all."""
        check_keys(self.params_model, conf)
        if conf and not airflow_conf.getboolean(*CONF_OVERRIDES):
            among = " (dry_run=false among them)" if "dry_run" in self.params_model.model_fields else ""
            raise InvalidParams(
                f"Airflow's [{CONF_OVERRIDES[0]}] {CONF_OVERRIDES[1]} is False: the run's conf "
                f"({', '.join(sorted(conf))}) is ignored and the run would take the form's defaults{among}; "
                "nothing was done",
                "set it to True (AIRFLOW__CORE__DAG_RUN_CONF_OVERRIDES_PARAMS=True), or trigger without a conf")


class FlowLockOperator(MirrorbookBaseOperator[FlowParams]):
    """Acquire (or, with `release=True`, release) the per-flow lock in the audit store."""

    deadline_s = 60.0

    def __init__(self, *, release: bool = False, with_reverse: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.release = release
        self.with_reverse = with_reverse  # failover/failback also drive the reverse flow

    def execute(self, context: Any) -> dict[str, Any]:
        topology = self.hook.topology
        if self.release:
            # The teardown runs whatever happened, bad parameters included: release what this run holds.
            rb = self.runbook(context, dry_run=False)
            holders = {f.name: rb.audit.lock_holder(f.name) for f in topology.flows}
            flows = [f for f in topology.flows if (h := holders[f.name]) is not None and h.run_id == rb.info.run_id]
            if flows:
                lock.release(rb, flows)
            out = self.log_outcomes(rb)
            out["anchor"] = self._anchor(rb, flows or self._named_flows(context))
            return out
        params = self.runbook_params(context)
        rb = self.runbook(context)
        flow = params.flow_spec
        flows = [flow] + ([r] if self.with_reverse and (r := topology.reverse_of(flow)) else [])
        # A run that died holding the lock left it behind: Airflow knows whether that run is over.
        ti = context["ti"]
        guarded(lambda: lock.acquire(rb, flows, self.hook.clients, ti.get_dagrun_state))
        return self.log_outcomes(rb)

    def _named_flows(self, context: Any) -> list[Any]:
        """The flow the run's parameters name, when it held no lock (a dry run), if it names one at all."""
        try:
            return [self.hook.topology.flow(str(context["params"].get("flow")))]
        except Refused:
            return []

    def _anchor(self, rb: Runbook, flows: list[Any]) -> dict[str, Any]:
        """The run is over: witness the audit head outside the store (runbooks/anchors.py says why it is no
        mutation)."""
        clusters = sorted({c for f in flows for c in (f.source, f.target)})
        done = anchors.write_anchor(rb.audit, self.hook.clients, clusters, rb.info.run_id)
        self.log.info("audit anchor: %s", json.dumps(done["anchor"]) if done["anchor"] else done["reason"])
        for cluster, what in done["clusters"].items():
            self.log.info("audit anchor on %s: %s", cluster, what)
        return done


class RunbookReportOperator(MirrorbookBaseOperator[FormParams]):
    """Last task: what the run did (or, for a dry run, the plan), read back from the audit trail; how the run
    ended, in the audit store."""

    def execute(self, context: Any) -> dict[str, Any]:
        report = run_report(self.audit(), run_info(context, self.task_id).run_id)
        for line in report["text"].splitlines():
            self.log.info("%s", line)
        report["result"] = self.record_run_result(context)
        return report
