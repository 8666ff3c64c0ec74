"""mm2_failover: translating a flow's groups from its source to its target, and the RPO lower bound of an unplanned
one."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

from mirrorbook.clients import Clients
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.internal_topics import read_checkpoints
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.mm2.precise import translate_precise
from mirrorbook.replication import backend_for
from mirrorbook.runbooks import readiness, unplanned
from mirrorbook.core.engine import Runbook
from mirrorbook.runbooks.move import Move
from mirrorbook.runbooks.plan import (PlanRow, PlanTable, TranslationPlan, add_earliest_fallback,
                                      earliest_rows, rows_from_precise)
from mirrorbook.topology import FlowSpec



def _remote_committed(committed: dict[str, dict[TP, int]], policy: ReplicationPolicy, source_alias: str,
                      target_topics: dict[str, int]) -> dict[str, dict[TP, int]]:
    """Committed offsets on topics the flow mirrors (the remote topic exists on the target)."""
    out = {}
    for g, offs in committed.items():
        kept = {tp: o for tp, o in offs.items()
                if tp.partition < target_topics.get(policy.format_remote_topic(source_alias, tp.topic), 0)}
        if kept:
            out[g] = kept
    return out


def wait_checkpoints(clients: Clients, flow: FlowSpec, committed: dict[str, dict[TP, int]],
                     timeout_s: float) -> list[str]:
    """MM2 emits checkpoints on an interval: wait (bounded) until they reflect the final committed offsets."""
    policy = ReplicationPolicy.for_flow(flow)
    want = {(g, policy.format_remote_topic(flow.source, tp.topic), tp.partition): o
            for g, offs in committed.items() for tp, o in offs.items()}
    deadline = time.monotonic() + timeout_s
    while True:
        log = read_checkpoints(clients.kafka_config(flow.target), flow.source, policy=policy,
                               group_filter=set(committed).__contains__)
        stale = sorted(f"{g} {t}-{p}" for (g, t, p), o in want.items()
                       if (cp := log.latest.get((g, t, p))) is None or cp.upstream_offset != o)
        if not stale or time.monotonic() > deadline:
            return stale
        time.sleep(1.0)


def compute_plan(rb: Runbook, clients: Clients, move: Move, groups: list[str]) -> TranslationPlan:
    flow, params = move.via, move.params
    policy = ReplicationPolicy.for_flow(flow)
    target_admin = clients.admin(flow.target)
    notes: list[str] = []
    meta: dict[str, Any] = dict(flow=move.flow.name, direction=move.direction, mode=params.mode,
                                translation=params.translation, from_cluster=move.from_cluster,
                                to_cluster=move.to_cluster, groups=groups, notes=notes)
    if not move.planned:
        found = unplanned.survivors(clients, rb.audit, flow, move.regex)
        wanted_groups = set(groups)
        rows = [r for r in unplanned.plan_rows(clients, flow, found, datetime.now(timezone.utc))
                if r.group in wanted_groups]
        notes += [f"unplanned: positions from what survives on {flow.target}"] + found.notes
        return TranslationPlan(rows=sorted(rows, key=_row_key), **meta)
    committed = _remote_committed(clients.admin(flow.source).committed_offsets(groups), policy, flow.source,
                                  target_admin.topics())
    remote: dict[str, str] = {}  # each topic's name on the target, formatted once

    def wanted(left: dict[str, dict[TP, int]]) -> dict[str, dict[TP, int | None]]:
        return {g: {TP(remote.get(tp.topic) or remote.setdefault(tp.topic, policy.format_remote_topic(
            flow.source, tp.topic)), tp.partition): o for tp, o in offs.items()} for g, offs in left.items()}

    if params.translation == "precise":
        # What the health check proved and is still exactly true is reused, the rest proved now; a thousand groups
        # are 150,000 rows: the plan is made column by column.
        proved = readiness.prove_positions(clients, flow, move.regex, committed, rb.audit)
        table = readiness.plan_table(proved, datetime.now(timezone.utc))
        # Only pairs readiness does not manage (none: it keeps the same pairs) would start at the partition's start.
        pairs = sum(len(o) for o in committed.values())
        rows = earliest_rows(table.keys(), wanted(committed), target_admin) if pairs > len(proved.wanted) else []
        notes += proved.notes(flow.target)
    else:
        mapping = backend_for(clients, flow).offset_mapping()
        wait_s = 2 * mapping.checkpoint_interval_s + 5
        stale = wait_checkpoints(clients, flow, committed, timeout_s=wait_s)
        if stale:
            notes.append(f"checkpoints behind the committed offsets after {wait_s}s for: " + ", ".join(stale[:10]))
        report = translate_precise(clients.kafka_config(flow.source), clients.kafka_config(flow.target),
                                   flow.source, flow.target, move.regex, policy=policy,
                                   offset_syncs_location=mapping.offset_syncs_location, committed=committed,
                                   source_isolation=mapping.source_isolation)
        rows = add_earliest_fallback(rows_from_precise(report, params.translation), wanted(committed),
                                     target_admin)
        if report.malformed_records:
            notes.append(f"{report.malformed_records} malformed MM2 records were skipped while translating")
        table = PlanTable()
    for r in rows:
        if r.method == "fallback:earliest":
            r.source_topic = policy.source_topic_of(r.target_topic, flow.source) or r.source_topic
    return TranslationPlan.of_table(table.add_rows(rows), **meta)


def _row_key(r: PlanRow) -> tuple[str, str, int]:
    return (r.group, r.target_topic, r.partition)
