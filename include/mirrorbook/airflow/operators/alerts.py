"""ProposeFailoverOperator: mm2_failover_on_alert's proposal — an unplanned failover that waits for approval."""

from __future__ import annotations

from typing import Any

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk.exceptions import AirflowSkipException

from mirrorbook.airflow.operators.base import RunbookTask, guarded
from mirrorbook.runbooks import alerts
from mirrorbook.runbooks.params import FormParams


class ProposeFailoverOperator(RunbookTask[FormParams], TriggerDagRunOperator):
    """Triggers mm2_failover for one episode (`episode`: flow, since_run_id) — mode unplanned, approval required —
    unless the flow is cooling down (then skipped, saying why). One run id per episode: a retry, or a second
    run of this DAG on the same episode, finds the proposal made and skips."""

    ui_color = "#fbe8e8"
    deadline_s = 120.0

    def __init__(self, *, params_model: type[FormParams], episode: dict[str, Any] | None = None,
                 topology_path: str | None = None, **kwargs: Any) -> None:
        # The mixin's arguments named here too: a mapped operator's arguments are checked against the __init__
        # Airflow's metaclass wrapped, and it wraps only those of BaseOperator's subclasses.
        # No logical date (like a REST trigger); nothing added to the conf (the runbook refuses unknown keys).
        super().__init__(params_model=params_model, topology_path=topology_path, trigger_dag_id=alerts.PROPOSED_DAG,
                         logical_date=None, skip_when_already_exists=True, openlineage_inject_parent_info=False,
                         **kwargs)
        self.episode = episode

    def execute(self, context: Any) -> Any:
        self.runbook_params(context)
        switch = self.hook.topology.failover_on_alert
        episode = alerts.Episode.model_validate(self.episode)
        rb = self.runbook(context, dry_run=False)
        why = guarded(lambda: alerts.cooling(rb.audit, episode, switch.cooldown_s))
        if why is not None:
            guarded(lambda: alerts.record_cooldown(rb, episode, why))
            raise AirflowSkipException(f"no failover of {episode.flow} proposed: {why}")
        run_id = alerts.proposal_run_id(episode)
        if not guarded(lambda: alerts.proposed(rb.audit, episode)):  # recorded once; triggered idempotently
            guarded(lambda: alerts.record_proposal(rb, episode, switch.consecutive_checks, run_id))
        self.log.warning("proposing the unplanned failover of %s: %s run %s waits for approval", episode.flow,
                         alerts.PROPOSED_DAG, run_id)
        self.trigger_run_id, self.conf = run_id, alerts.proposal_conf(episode.flow)
        return super().execute(context)
