"""The one convention every mirrorbook task follows, operators and sensors alike.

- Parameters arrive one way: the DAG run's `context["params"]`, validated once per task by the
  runbook's pydantic model (`params_model`), and used in that validated form (no templated copies).
- The hook (topology, clients, audit store) is built once per task and reused (a sensor's pokes too).
- Failures that no retry can fix — bad input, a refused gate, a final verdict — fail the task for good
  (`AirflowFailException`); everything else may be retried.
- Every task has an `execution_timeout` derived from its own deadlines (`deadline_s`), so no runaway
  task holds a flow lock.
"""

from __future__ import annotations

from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Generic, TypeVar

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from mirrorbook.airflow.hooks.mirrorbook import MirrorbookHook
from mirrorbook.audit import AuditStore
from mirrorbook.errors import MirrorbookError, Refused, Verdict
from mirrorbook.runbooks import intents
from mirrorbook.core.engine import RunInfo, Runbook
from mirrorbook.runbooks.params import ChangeParams, FormParams, parse
from mirrorbook.runbooks.standing import Rerun, at_failure
from mirrorbook.topology import FlowSpec, TopologyError

T = TypeVar("T")
P = TypeVar("P", bound=FormParams)  # a task's parameters: the model of its runbook's form

if TYPE_CHECKING:
    # What the mixin is mixed into (task_id, log, ...), for the type checker; at run time it adds no base.
    _Task = BaseOperator
else:
    _Task = object


# Failures that no retry can fix. They fail the task at once, with their precise message.
FINAL = (Refused, TopologyError, Verdict)


def run_info(context: Any, task_id: str) -> RunInfo:
    dag_run = context["dag_run"]
    return RunInfo(run_id=dag_run.run_id, dag_id=dag_run.dag_id, task_id=task_id,
                   user=getattr(dag_run, "triggering_user_name", None))


def guarded(fn: Callable[[], T], standing: Callable[[], str] | None = None) -> T:
    """Run `fn`; turn final mirrorbook errors into AirflowFailException (no retries, precise message).
    `standing` (never raising) says where the run stands: its lines end the error of whatever failed."""
    try:
        return fn()
    except FINAL as exc:
        raise AirflowFailException(_ending(str(exc), standing)) from exc
    except MirrorbookError as exc:
        raise RuntimeError(_ending(str(exc), standing)) from exc
    except AirflowException:
        raise
    except Exception as exc:
        if standing is None:
            raise
        notes = "".join(f"\n  {n}" for n in getattr(exc, "__notes__", []))  # e.g. what the task already changed
        raise RuntimeError(_ending(f"{type(exc).__name__}: {exc}{notes}", standing)) from exc


def _ending(message: str, standing: Callable[[], str] | None) -> str:
    return f"{message}\n{standing()}" if standing else message


FAILED_STATES = {"failed", "upstream_failed"}


class RunbookTask(Generic[P], _Task):
    """Mixin for BaseOperator and BaseSensorOperator subclasses: the convention above. `P` is the model of the
    parameters the task reads (`runbook_params`): its runbook's, or a base of every runbook's it serves."""

    ui_color = "#e8f1fb"
    # The longest one execution of this task may take: its own waits and deadlines, plus a margin.
    deadline_s: ClassVar[float] = 300.0

    def __init__(self, *, params_model: type[P], topology_path: str | None = None,
                 **kwargs: Any) -> None:
        kwargs.setdefault("execution_timeout", timedelta(seconds=self.task_deadline_s(kwargs)))
        super().__init__(**kwargs)
        self.params_model = params_model
        self.topology_path = topology_path
        self._parsed: P | None = None

    def task_deadline_s(self, kwargs: dict[str, Any]) -> float:
        """`deadline_s` unless a task's deadline depends on how it is configured (its step, its waits)."""
        return self.deadline_s

    @cached_property
    def hook(self) -> MirrorbookHook:
        return MirrorbookHook(self.topology_path)

    def audit(self) -> AuditStore:
        return self.hook.audit()

    def runbook_params(self, context: Any) -> P:
        """The run's parameters, validated by the runbook's model (once per task)."""
        if self._parsed is None:
            self._parsed = guarded(lambda: parse(self.params_model, context["params"], self.hook.topology))
        return self._parsed

    def runbook(self, context: Any, dry_run: bool | None = None) -> Runbook:
        """The task's runbook. Before anything else, the calls an earlier attempt of this task made without
        recording their outcome (it was killed) are checked against the clusters and recorded."""
        if dry_run is None:
            params = self.runbook_params(context)
            dry_run = isinstance(params, ChangeParams) and params.dry_run  # the runbooks that change something
        rb = Runbook(run_info(context, self.task_id), self.audit(), dry_run=dry_run)
        guarded(lambda: intents.reconcile(rb, self.hook.clients, self.hook.topology.flows, held=False))
        return rb

    def guarded_run(self, rb: Runbook, flows: list[FlowSpec], fn: Callable[[], T], rerun: Rerun | None = None) -> T:
        """`guarded` for a task that drives `flows`: its error ends with where the run stands (`at_failure`)."""
        return guarded(fn, lambda: at_failure(rb, self.hook.clients, flows, rerun))

    def record_run_result(self, context: Any, *, failed: bool = False) -> str:
        """The run is over (this is its last task): how it ended, appended to the audit store — what the
        metrics' `mirrorbook_runbook_runs_total{dag,result}` counts. `failed` when this task itself failed; any
        other task of the run that failed (or never ran because one did) makes it `failed` too."""
        ti = context["ti"]
        states = ti.get_task_states(dag_id=ti.dag_id, run_ids=[ti.run_id]).get(ti.run_id, {})
        others = any(state in FAILED_STATES for task, state in states.items() if task != ti.task_id)
        dry_run = bool((context.get("params") or {}).get("dry_run"))
        result = "failed" if failed or others else "dry_run" if dry_run else "success"
        self.audit().record_run_result(ti.dag_id, ti.run_id, result)
        return result

    def log_outcomes(self, rb: Runbook) -> dict[str, Any]:
        for o in rb.outcomes:
            self.log.info("%s on %s: %s (%d mutation(s))", o.step, o.flow, o.result, o.mutations)
            for p in o.planned:
                self.log.info("  [dry run] would %s", p.describe())
        return rb.summary()


class MirrorbookBaseOperator(RunbookTask[P], BaseOperator):
    """The base of every mirrorbook operator: cheap constructor, work in `execute`, clear failures."""

    def __init__(self, **kwargs: Any) -> None:
        # Defined here (not only inherited from the mixin) so that Airflow's metaclass wraps it: it wraps
        # an __init__ only where a class defines one, and BaseOperator's bookkeeping expects that wrapper.
        super().__init__(**kwargs)
