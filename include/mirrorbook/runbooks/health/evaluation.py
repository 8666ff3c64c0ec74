"""From what a pass read to each flow's health: pure functions, no client, no clock (`now` is given).

- checkpoint age (per managed group) = now - the record timestamp of the group's newest checkpoint.
  MM2 only emits a checkpoint when a group's offsets change, so age alone cannot be a threshold (an
  idle group is not a fault). A group is *behind* when its committed offset on the source differs
  from its newest checkpoint on a replicated partition; the threshold fails a group that has stayed
  behind, with no newer checkpoint, for longer than `max_checkpoint_age_s` across samples
  (`behind_since` is carried from the previous sample in the metrics history; first seen = now).
  A consumer resuming after an idle hour is no alert; a checkpoint connector that stopped emitting is.
- heartbeat age = now - the newest heartbeat for source->target; None = none within the lookback.
- lost records (DATA_LOSS, TARGET_RESET): `loss.assess`, against the previous sample.
"""

from __future__ import annotations

from datetime import datetime

from mirrorbook.audit import MetricsSample
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.flows import FlowStatus
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.mm2.remote_cluster_utils import group_matcher
from mirrorbook.runbooks.checks import drain_lag
from mirrorbook.runbooks.health.loss import TargetTopic, assess
from mirrorbook.runbooks.health.params import HealthParams
from mirrorbook.runbooks.health.reading import TargetFreshness
from mirrorbook.runbooks.health.results import FlowHealth, GroupCheckpointHealth, at_ms, fmt_s, iso
from mirrorbook.runbooks.plan import INTERNAL_GROUPS
from mirrorbook.topology import FlowSpec, Topology


def group_checkpoints(flow: FlowSpec, regex: str, status: FlowStatus, target: TargetFreshness,
                      committed: dict[str, dict[TP, int]] | None, previous: MetricsSample | None,
                      now: datetime) -> list[GroupCheckpointHealth]:
    """Age and staleness of each managed group's checkpoints (see the module docstring)."""
    policy = ReplicationPolicy.for_flow(flow)
    log = target.checkpoints.get(policy.checkpoints_topic(flow.source))
    newest_ms, found = (log.newest_ms(), log.by_group()) if log is not None else ({}, {})
    matches = group_matcher(regex)
    names = committed.keys() if committed is not None else found.keys()
    groups = sorted(g for g in names if matches(g) and not INTERNAL_GROUPS.match(g))
    replicated = set(status.replicated_topics)
    before = {c["group"]: c for c in (previous.metrics.get("checkpoints") or [])} if previous else {}
    out = []
    for g in groups:
        newest = at_ms(newest_ms[g]) if newest_ms.get(g, -1) >= 0 else None
        upstream = {tp: cp.upstream_offset for tp, cp in found.get(g, {}).items()}
        behind = sorted(str(tp) for tp, off in (committed or {}).get(g, {}).items()
                        if (remote := policy.format_remote_topic(flow.source, tp.topic)) in replicated
                        and upstream.get(TP(remote, tp.partition)) != off)
        since = None
        if behind:
            prev = before.get(g) or {}
            same = prev.get("behind") and prev.get("newest_at") == iso(newest) and prev.get("behind_since")
            since = datetime.fromisoformat(prev["behind_since"]) if same else now
        out.append(GroupCheckpointHealth(group=g, newest_at=newest, behind=behind, behind_since=since,
                                         age_s=(now - newest).total_seconds() if newest else None))
    return out


def evaluate(fh: FlowHealth, params: HealthParams, now: datetime) -> list[str]:
    """Every threshold `fh` crosses, as messages naming the flow and the figure."""
    st, name, out = fh.status, fh.flow, []
    if st.state.value != params.required_state:  # the cause first, when the flow could not be read
        out.append(st.describe(required=params.required_state, errors=False))
    out += [f"flow {name}: {p}" for p in [*(st.errors if st.unreadable is None else []), *fh.problems]]
    lag = drain_lag(st)
    if lag:
        tp, worst = max(lag.items(), key=lambda kv: kv[1])
        if worst > params.max_lag:
            row = next((p for p in st.lag if (p.topic, p.partition) == tp), None)
            figure = f"{worst}" if row is None or row.lag_exact else f"up to {worst} (at least {row.lag_low})"
            out.append(f"flow {name}: replication lag {figure} records on {tp} (max_lag={params.max_lag}; "
                       f"total {sum(lag.values())})")
    hb = f"{fh.source}->{fh.target}"
    if fh.heartbeat_age_s is None:
        out.append(f"flow {name}: no heartbeat {hb} on {fh.target}'s heartbeats topics within the last "
                   f"{fh.heartbeat_lookback_s:.0f}s (max_heartbeat_age_s={params.max_heartbeat_age_s:g})")
    elif fh.heartbeat_age_s > params.max_heartbeat_age_s:
        out.append(f"flow {name}: newest heartbeat {hb} is {fh.heartbeat_age_s:.1f}s old "
                   f"(max_heartbeat_age_s={params.max_heartbeat_age_s:g})")
    for c in fh.checkpoints:
        stale = c.behind_for_s(now)
        if stale is not None and stale > params.max_checkpoint_age_s:
            out.append(f"flow {name}: group {c.group} committed past its newest checkpoint on "
                       f"{', '.join(c.behind[:3])}{' …' if len(c.behind) > 3 else ''} and no newer checkpoint came "
                       f"for {stale:.0f}s (newest checkpoint {fmt_s(c.age_s)} old; "
                       f"max_checkpoint_age_s={params.max_checkpoint_age_s:g})")
    if fh.loss is not None:
        out += fh.loss.violations(name, fh.source, fh.target)
    if out and fh.lock_holder:
        out = [f"{v} [flow locked by {fh.lock_holder}]" for v in out]
    return out


def flow_health(flow: FlowSpec, topology: Topology, status: FlowStatus, target: TargetFreshness,
                committed: dict[str, dict[TP, int]] | None, *, params: HealthParams, now: datetime,
                previous: MetricsSample | None = None, lock_holder: str | None = None,
                source_error: str | None = None, hops: int | None = None,
                mirrored: list[TargetTopic] | None = None, mirrored_error: str | None = None) -> FlowHealth:
    """One flow's health from what the pass read of it (`source_error`: its source's groups were unreadable;
    `mirrored`: the flow's mirrored topics on the target, None with `mirrored_error` when unreadable)."""
    hb_ms = target.heartbeats.get((flow.source, flow.target))
    problems = [f"MM2 topics on {target.cluster} unreadable: {target.error}"] if target.error else []
    if source_error is not None:
        problems.append(f"committed offsets on {flow.source} unreadable: {source_error}")
    if mirrored_error is not None and not target.error:
        problems.append(f"mirrored topics on {target.cluster} unreadable: {mirrored_error}")
    fh = FlowHealth(flow=flow.name, source=flow.source, target=flow.target, status=status,
                    heartbeat_at=at_ms(hb_ms) if hb_ms is not None else None,
                    heartbeat_age_s=max(0.0, now.timestamp() - hb_ms / 1000) if hb_ms is not None else None,
                    heartbeat_lookback_s=params.heartbeat_lookback_s,
                    checkpoints=group_checkpoints(flow, topology.groups_regex(flow), status, target, committed,
                                                  previous, now),
                    hops=hops, lock_holder=lock_holder, problems=problems, committed=committed,
                    loss=assess(status, mirrored, None if target.error else set(target.topics),
                                previous.metrics if previous else None, previous.observed_at if previous else None,
                                now))
    fh.violations = evaluate(fh, params, now)
    return fh
