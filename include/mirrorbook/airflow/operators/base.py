"""The base of every mirrorbook operator: cheap constructor, work in `execute`, clear failures."""

from __future__ import annotations

from functools import cached_property
from typing import Any, Callable, TypeVar

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from mirrorbook.airflow.hooks.mirrorbook import MirrorbookHook
from mirrorbook.audit import AuditStore
from mirrorbook.errors import MirrorbookError, Refused
from mirrorbook.runbooks.engine import RunInfo, Runbook
from mirrorbook.topology import TopologyError

T = TypeVar("T")
# Failures that no retry can fix: bad input, a refused gate. They fail the task at once.
FINAL = (Refused, TopologyError)


def as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def run_info(context: Any, task_id: str) -> RunInfo:
    dag_run = context["dag_run"]
    return RunInfo(run_id=dag_run.run_id, dag_id=dag_run.dag_id, task_id=task_id,
                   user=getattr(dag_run, "triggering_user_name", None))


def guarded(fn: Callable[[], T]) -> T:
    """Run `fn`; turn final mirrorbook errors into AirflowFailException (no retries, precise message)."""
    try:
        return fn()
    except FINAL as exc:
        raise AirflowFailException(str(exc)) from exc
    except MirrorbookError as exc:
        raise RuntimeError(str(exc)) from exc


class MirrorbookBaseOperator(BaseOperator):
    """Common fields: the flow, dry_run, and where the topology lives."""

    template_fields: tuple[str, ...] = ("flow", "dry_run")
    ui_color = "#e8f1fb"

    def __init__(self, *, flow: str = "{{ params.flow }}", dry_run: Any = False, topology_path: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.flow = flow
        self.dry_run = dry_run
        self.topology_path = topology_path

    @cached_property
    def hook(self) -> MirrorbookHook:
        return MirrorbookHook(self.topology_path)

    def audit(self) -> AuditStore:
        return self.hook.audit()

    def runbook(self, context: Any) -> Runbook:
        return Runbook(run_info(context, self.task_id), self.audit(), dry_run=as_bool(self.dry_run))

    def log_outcomes(self, rb: Runbook) -> dict[str, Any]:
        for o in rb.outcomes:
            self.log.info("%s on %s: %s (%d mutation(s))", o.step, o.flow, o.result, o.mutations)
            for p in o.planned:
                self.log.info("  [dry run] would %s", p.describe())
        return rb.summary()
