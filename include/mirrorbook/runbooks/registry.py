"""Every runbook DAG mirrorbook defines, by DAG id: the model its parameters (and its form) come from, and the checks
its run makes before anything changes. The runbook modules sit below this one: none of them, and nothing below
them, looks a runbook up by its DAG id."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from mirrorbook.runbooks import move
from mirrorbook.runbooks.alerts import OnAlertParams
from mirrorbook.runbooks.drill import DrillParams
from mirrorbook.runbooks.health import HealthParams
from mirrorbook.runbooks.params import (FailbackParams, FailoverParams, FormParams, OffsetsParams, PauseResumeParams,
                                        Preflight, check_keys)
from mirrorbook.runbooks.rpo_sampler import SamplerParams


def _model_preflight(params: FormParams, context: Preflight) -> list[str]:
    return params.preflight(context)


@dataclass(frozen=True)
class Registered:
    params: type[FormParams]
    # Checks that need the audit store or a cluster, run once by the first task before anything changes: raises
    # InvalidParams for what makes the run impossible, returns warnings for the plan.
    preflight: Callable[[Any, Preflight], list[str]] = _model_preflight


# The runbooks with a form in the plugin's pages (a flow's actions).
FORMS: dict[str, Registered] = {
    "mm2_pause_resume": Registered(PauseResumeParams),
    "mm2_offsets": Registered(OffsetsParams),
    "mm2_failover": Registered(FailoverParams, move.preflight),
    "mm2_failback": Registered(FailbackParams, move.preflight),
}
RUNBOOKS: dict[str, Registered] = {
    **FORMS,
    "dr_drill": Registered(DrillParams),
    "mm2_health_check": Registered(HealthParams),
    "mm2_failover_on_alert": Registered(OnAlertParams),
    "mm2_rpo_sampler": Registered(SamplerParams),
}


def model_of(dag_id: str) -> type[FormParams] | None:
    """The parameters model of one of mirrorbook's DAGs, or None for a DAG that is not ours."""
    found = RUNBOOKS.get(dag_id)
    return found.params if found else None


def preflight(params: FormParams, context: Preflight) -> list[str]:
    """The preflight of the runbook whose parameters these are."""
    found = next((r for r in RUNBOOKS.values() if r.params is type(params)), None)
    return (found.preflight if found else _model_preflight)(params, context)


def check_conf(dag_id: str, conf: Mapping[str, Any]) -> None:
    """`check_keys` for one of mirrorbook's DAGs (`mirrorbook trigger`, before anything is sent)."""
    model = model_of(dag_id)
    if model is not None:
        check_keys(model, conf)
