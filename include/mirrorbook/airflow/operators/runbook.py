"""Operators every runbook DAG shares: validate the form, take/release the flow lock, report the run."""

from __future__ import annotations

from typing import Any

from mirrorbook.airflow.operators.base import MirrorbookBaseOperator, guarded, run_info
from mirrorbook.runbooks import lock, params as runbook_params
from mirrorbook.runbooks.engine import Runbook
from mirrorbook.runbooks.report import run_report

PARAM_MODELS = {
    "pause_resume": runbook_params.PauseResumeParams,
    "offsets": runbook_params.OffsetsParams,
    "failover": runbook_params.FailoverParams,
    "failback": runbook_params.FailbackParams,
}


class ValidateParamsOperator(MirrorbookBaseOperator):
    """First task of every runbook: bad input fails here, with a precise message, before any call."""

    template_fields = ()

    def __init__(self, *, params_model: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.params_model = params_model

    def execute(self, context: Any) -> dict[str, Any]:
        return guarded(lambda: self._validate(context))

    def _validate(self, context: Any) -> dict[str, Any]:
        model = PARAM_MODELS[self.params_model]
        raw = dict(context["params"])
        rb = Runbook(run_info(context, self.task_id), self.audit())
        with rb.step("params.validate", str(raw.get("flow"))) as step:
            step.note(runbook=self.params_model)
            parsed = runbook_params.parse(model, raw, self.hook.topology)
            step.note(params=parsed.model_dump(mode="json", exclude={"offsets"}))
        self.log.info("parameters OK: %s", parsed.model_dump(exclude={"offsets"}))
        return parsed.model_dump(mode="json")


class FlowLockOperator(MirrorbookBaseOperator):
    """Acquire (or, with `release=True`, release) the per-flow lock in the audit store."""

    def __init__(self, *, release: bool = False, with_reverse: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.release = release
        self.with_reverse = with_reverse  # failover/failback also drive the reverse flow

    def execute(self, context: Any) -> dict[str, Any]:
        rb = self.runbook(context)
        topology = self.hook.topology
        flow = guarded(lambda: topology.flow(self.flow))
        flows = [flow] + ([r] if self.with_reverse and (r := topology.reverse_of(flow)) else [])
        if self.release:
            rb.dry_run = False
            lock.release(rb, flows)
        else:
            guarded(lambda: lock.acquire(rb, flows))
        return self.log_outcomes(rb)


class RunbookReportOperator(MirrorbookBaseOperator):
    """Last task: what the run did (or, for a dry run, the plan), read back from the audit trail."""

    def execute(self, context: Any) -> dict[str, Any]:
        report = run_report(self.audit(), run_info(context, self.task_id).run_id)
        for line in report["text"].splitlines():
            self.log.info("%s", line)
        return report
