"""mm2_health_check: every flow's state, lag, heartbeat and checkpoint freshness and hops in one concurrent
pass; thresholds; a metrics sample per flow in the audit store's history; optional restart of FAILED parts.

- `params`: the form (`HealthParams`, `FLOW_STATES`);
- `results`: what a pass found (`FlowHealth`, `HealthReport`) and the metrics sample each flow leaves;
- `reading`: what one pass reads — a target's MM2 topics (one consumer for all flows into it) and a
  source's committed group offsets;
- `evaluation`: pure — from those readings and the previous sample to each flow's health and violations;
- `one_pass`: one pass over many flows, everything read at once (`collect`, `collect_once`);
- `restarts`: restarting FAILED connectors and tasks (audited, under the flow's lock);
- `run`: `run_health_check`, what the mm2_health_check task runs.
"""

from mirrorbook.runbooks.health.params import FLOW_STATES, HealthParams
from mirrorbook.runbooks.health.results import HEALTH_SOURCE, FlowHealth, GroupCheckpointHealth, HealthReport
from mirrorbook.runbooks.health.reading import TargetFreshness, read_source_groups, read_target, scan_target
from mirrorbook.runbooks.health.evaluation import evaluate, flow_health, group_checkpoints
from mirrorbook.runbooks.health.one_pass import collect, collect_once, run_concurrently
from mirrorbook.runbooks.health.restarts import failed_roles, restart_failed
from mirrorbook.runbooks.health.run import run_health_check

__all__ = [
    "FLOW_STATES", "HEALTH_SOURCE", "FlowHealth", "GroupCheckpointHealth", "HealthParams", "HealthReport",
    "TargetFreshness", "collect", "collect_once", "evaluate", "failed_roles", "flow_health", "group_checkpoints",
    "read_source_groups", "read_target", "restart_failed", "run_concurrently", "run_health_check", "scan_target",
]
