"""What each runbook expects the parity jobs to find, and what their verdict does to the run.

- pause/resume/stop and connector-offsets changes must leave every managed consumer group exactly
  where it was, on both clusters ("unchanged"); an offsets change must also have left the
  connector's offsets as requested (read back while it was STOPPED, judged again by the job).
- failover/failback: every (group, partition) of the plan committed on the new cluster at the
  planned offset (and never past the proven position); for a planned move, the records of the
  moved topics identical on both sides and, at each group's boundary, the record the group reads
  next on the new cluster the one it would have read next on the old.
The verdict is audited; a failure fails the task with the groups and partitions named.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence, cast

import pyarrow as pa

from mirrorbook.clients import Clients
from mirrorbook.errors import MirrorbookError
from mirrorbook.kafka.admin import Watermarks
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.parity import (ExpectedOffset, GroupSnapshot, ParitySummary, RecordRange, schemas, unchanged,
                               write_group_snapshot)
from mirrorbook.parity.collector import columns_table, expected_table
from mirrorbook.core.engine import Runbook
from mirrorbook.runbooks.files import artifacts_dir, safe_name
from mirrorbook.runbooks.plan import TranslationPlan, managed_groups
from mirrorbook.topology import FlowSpec, Topology

BEFORE_KEY = "parity.groups_before"
CONNECTOR_KEY = "parity.connector_offsets"


def workdir_key(rb: Runbook, task_id: str) -> str:
    """A task's place among the proofs' files: <dag>/<run>/<task> (under the artifacts dir, or a parity URI)."""
    return f"{rb.info.dag_id or 'run'}/{safe_name(rb.info.run_id)}/{task_id}"


def workdir(rb: Runbook, task_id: str) -> Path:
    return artifacts_dir() / "parity" / workdir_key(rb, task_id)


def _key(offsets: dict[str, dict[TP, int]]) -> dict[str, dict[str, int]]:
    return {g: {f"{tp.topic}\t{tp.partition}": o for tp, o in sorted(offs.items())} for g, offs in offsets.items()}


def _unkey(data: dict[str, dict[str, int]]) -> dict[str, dict[TP, int]]:
    out = {}
    for g, offs in data.items():
        out[g] = {TP(k.split("\t")[0], int(k.split("\t")[1])): o for k, o in offs.items()}
    return out


def capture_groups(rb: Runbook, clients: Clients, topology: Topology, flow: FlowSpec) -> dict[str, Any]:
    """Committed offsets of the flow's managed groups on both clusters, kept in the run's progress."""
    regex = topology.groups_regex(flow)
    before = {}
    for cluster in (flow.source, flow.target):
        admin = clients.admin(cluster)
        before[cluster] = _key(admin.committed_offsets(managed_groups(admin, regex)))
    rb.progress_set(BEFORE_KEY, before)
    return {c: len(g) for c, g in before.items()}


def unchanged_expectation(rb: Runbook) -> list[ExpectedOffset]:
    before = rb.progress_get(BEFORE_KEY) or {}
    rows: list[ExpectedOffset] = []
    for cluster, groups in before.items():
        rows += unchanged(cluster, _unkey(groups))
    return rows


def connector_expectation(rb: Runbook) -> tuple[list[ExpectedOffset], dict[str, dict[str, dict[TP, int]]]]:
    """The connector's offsets as requested vs as read back while STOPPED (kept by the offsets step)."""
    kept = rb.progress_get(CONNECTOR_KEY)
    if not kept:
        return [], {}
    name, cluster = kept["connector"], f"connect:{kept['connect_cluster']}"
    expected = [ExpectedOffset(cluster=cluster, group=name, topic=r["topic"], partition=r["partition"],
                               expected_offset=r["offset"]) for r in kept["expected"]]
    actual = {cluster: {name: {TP(r["topic"], r["partition"]): r["offset"] for r in kept["actual"]}}}
    return expected, actual


def keep_connector_offsets(rb: Runbook, flow: FlowSpec, connector: str, expected: dict[str, Any],
                           actual: dict[str, Any]) -> None:
    """Called by the offsets step right after its read-back, so the parity job judges the same moment."""
    def rows(data: dict[str, Any]) -> list[dict[str, Any]]:
        out = []
        for key, off in data.items():
            part = json.loads(key)
            if off is not None and "topic" in part and "partition" in part:
                out.append({"topic": str(part.get("group", "")) + ("/" if "group" in part else "") + part["topic"],
                            "partition": int(part["partition"]), "offset": int(off["offset"])})
        return out
    rb.progress_set(CONNECTOR_KEY, {"connector": connector, "connect_cluster": flow.connect_cluster,
                                    "expected": rows(expected), "actual": rows(actual)})


def move_expectation(plan: TranslationPlan) -> pa.Table:
    """Each plan row's group committed on the new cluster at its planned offset, as EXPECTED's columns."""
    c = plan.position_columns()
    n = len(c["offset"])
    return columns_table(schemas.EXPECTED, {
        "cluster": [plan.to_cluster] * n, "group": c["group"], "topic": c["target_topic"], "partition": c["partition"],
        "expected_offset": c["offset"], "true_offset": c["precise_offset"], "source_cluster": [plan.from_cluster] * n,
        "source_topic": [None if t == "?" else t for t in c["source_topic"]], "source_partition": c["partition"],
        "source_committed": c["source_offset"]})


def move_records(clients: Clients, plan: TranslationPlan, via: FlowSpec) -> tuple[list[RecordRange], pa.Table]:
    """The moved topics' ranges to compare on both sides (see `record_ranges`), and each group's boundary
    (BOUNDARIES' columns).

    The boundary is the truth as it stands now, read from both clusters — C committed on the source, T
    committed on the target — never the plan's numbers (the plan's offset rides along, for comparison):
    a proof that took the plan's word would prove the plan, not the move.
    Only rows translated through `via` in the forward direction (remote topic on the new cluster) —
    records of failback's back-to-origin topics are compared by the original flow's own parity.
    """
    policy = ReplicationPolicy.for_flow(via)
    every = plan.position_columns()
    forward: dict[tuple[str, str], bool] = {}  # a few hundred topic pairs over 150,000 rows: each asked once
    for pair in zip(every["source_topic"], every["target_topic"]):
        if pair not in forward:
            forward[pair] = pair[0] != "?" and policy.format_remote_topic(via.source, pair[0]) == pair[1]
    kept = [i for i, (s, t, c) in enumerate(zip(every["source_topic"], every["target_topic"], every["source_offset"]))
            if c is not None and forward[s, t]]
    col = {name: [values[i] for i in kept] for name, values in every.items()}
    groups = sorted(set(col["group"]))
    # A TP is a tuple: a (topic, partition) finds its offset without a TP made for each row.
    Committed = dict[str, dict[tuple[str, int], int]]
    on_source = cast(Committed, clients.admin(via.source).committed_offsets(groups))
    on_target = cast(Committed, clients.admin(via.target).committed_offsets(groups))
    nothing: dict[tuple[str, int], int] = {}
    boundaries = columns_table(schemas.BOUNDARIES, {
        "group": col["group"], "source_topic": col["source_topic"], "source_partition": col["partition"],
        # a group gone from the source since the plan: its last known position
        "source_committed": [on_source.get(g, nothing).get((s, p), c) for g, s, p, c in zip(
            col["group"], col["source_topic"], col["partition"], col["source_offset"])],
        "target_topic": col["target_topic"], "target_partition": col["partition"],
        "target_offset": [on_target.get(g, nothing).get((t, p)) for g, t, p in zip(
            col["group"], col["target_topic"], col["partition"])],
        "plan_offset": col["offset"]})
    src_marks = clients.admin(via.source).watermarks(TP(*tp) for tp in set(zip(col["source_topic"], col["partition"])))
    dst_marks = clients.admin(via.target).watermarks(TP(*tp) for tp in set(zip(col["target_topic"], col["partition"])))
    stable = transactional_partitions(clients, via, src_marks)
    return record_ranges(col, boundaries, src_marks, dst_marks, stable), boundaries


def transactional_partitions(clients: Clients, via: FlowSpec, marks: dict[TP, Watermarks]) -> dict[TP, int]:
    """The source partitions that carry transactions, with their last stable offsets: those the flow's samples
    (health check, RPO sampler) saw with offsets without records, and those whose last offsets show it now (one
    bounded read, `kafka.records.tails_with_gaps`). The record proof reads them read_committed too, so aborted
    records count nowhere."""
    from mirrorbook.kafka.records import tails_with_gaps
    from mirrorbook.mm2.lag import shows_gaps
    from mirrorbook.runbooks.health.results import latest_sample

    admin = clients.admin(via.source)
    found = tails_with_gaps(admin, {tp: (m.low, m.high) for tp, m in marks.items()})
    try:
        from mirrorbook.audit import AuditStore

        audit = AuditStore.from_env()
        samples = [s.metrics.get("partitions") or [] for s in (latest_sample(audit, via.name),
                                                               audit.replication_sample(via.name)) if s is not None]
    except MirrorbookError:
        samples = []
    for rows in samples:
        found |= {TP(r["topic"], int(r["partition"])) for r in rows if isinstance(r, dict)
                  and (shows_gaps(r) or r.get("by") == "records") and TP(r["topic"], int(r["partition"])) in marks}
    return admin.last_stable_offsets(found) if found else {}


WARM_RECORDS = 20


def warm_ranges(clients: Clients, via: FlowSpec) -> list[RecordRange]:
    """The last few records of one partition the flow replicates, on both sides: the record proof's own
    path (the Kafka source on both clusters, hashing, matching) run small, so the Spark Connect server has
    loaded and compiled it before the proof that counts. Empty when nothing is replicated yet."""
    policy = ReplicationPolicy.for_flow(via)
    src, dst = clients.admin(via.source), clients.admin(via.target)
    on_source = set(src.topics())
    for remote in sorted(dst.topics()):
        topic = policy.source_topic_of(remote, via.source)
        if not topic or topic not in on_source or policy.is_heartbeats_topic(remote) \
                or policy.is_internal_topic(remote):
            continue
        s_end = src.high_watermarks([TP(topic, 0)])[TP(topic, 0)]
        t_end = dst.high_watermarks([TP(remote, 0)])[TP(remote, 0)]
        if s_end and t_end:
            return [RecordRange(source_topic=topic, source_partition=0, target_topic=remote, target_partition=0,
                                source_start=max(0, s_end - WARM_RECORDS), source_end=s_end,
                                target_start=max(0, t_end - WARM_RECORDS), target_end=t_end)]
    return []


def warm_group_snapshot(out_dir: Path, via: FlowSpec) -> GroupSnapshot:
    """A one-row group snapshot shaped as a move's (expected, committed and watermarks on the target): what
    warm_proof runs the group proof on, so its plan is compiled before the proof that counts."""
    tp = TP("mirrorbook-warm-up", 0)
    expected = [ExpectedOffset(cluster=via.target, group="mirrorbook-warm-up", topic=tp.topic, partition=0,
                               expected_offset=0)]
    return write_group_snapshot(out_dir, expected, {via.target: {"mirrorbook-warm-up": {tp: 0}}},
                                {via.target: {tp: (0, 0)}})


def record_ranges(positions: Mapping[str, Sequence[Any]], boundaries: pa.Table, src_marks: dict[TP, Watermarks],
                  dst_marks: dict[TP, Watermarks], stable: dict[TP, int] | None = None) -> list[RecordRange]:
    """Per partition pair, from an exactly aligned point to the end on both sides. `positions`: the moved rows
    (`TranslationPlan.position_columns`), `boundaries`: BOUNDARIES' columns, as read now.

    What the moved groups will read is everything from the lowest of their positions on: where every
    row of a pair is proven exact (the record at source C *is* the record at target T), both sides
    start at the lowest such (C, T) — a topic holding days of data is not read whole on the cutover
    path. Any unproven row (MM2's conservative checkpoint), or a position read now below that anchor
    on either side, leaves no exact anchor: the whole retained partition is compared. The anchor only
    saves reading; a wrong one cannot pass — the records below it would show as missing or extra.
    """
    # Per pair: its rows, those proven exact, and the lowest exact (C, T).
    by_pair: dict[tuple[str, str, int], list[Any]] = {}
    for s, t, p, c, o, po in zip(*(positions[n] for n in (
            "source_topic", "target_topic", "partition", "source_offset", "offset", "precise_offset"))):
        pair = by_pair.get((s, t, p))
        if pair is None:
            pair = by_pair[s, t, p] = [0, 0, None]
        pair[0] += 1
        if po is not None and o == po and c is not None:
            pair[1] += 1
            pair[2] = (c, o) if pair[2] is None else min(pair[2], (c, o))
    # The lowest positions read now, per pair: the group committed lowest on each side.
    lowest_c: dict[tuple[str, str, int], int] = {}
    lowest_t: dict[tuple[str, str, int], int] = {}
    for s, t, p, c, o in zip(*(boundaries.column(n).to_pylist() for n in (
            "source_topic", "target_topic", "source_partition", "source_committed", "target_offset"))):
        lowest_c[s, t, p] = min(c, lowest_c.get((s, t, p), c))
        if o is not None:
            lowest_t[s, t, p] = min(o, lowest_t.get((s, t, p), o))
    ranges = []
    for (s, t, p), (n, exact, anchor) in sorted(by_pair.items()):
        src, dst = src_marks[TP(s, p)], dst_marks[TP(t, p)]
        start_s, start_t = src.low, dst.low
        if exact == n:
            anchor_s, anchor_t = anchor
            below = lowest_c.get((s, t, p), anchor_s) < anchor_s or lowest_t.get((s, t, p), anchor_t) < anchor_t
            if anchor_s >= src.low and anchor_t >= dst.low and not below:
                start_s, start_t = anchor_s, anchor_t
        ranges.append(RecordRange(source_topic=s, source_partition=p, target_topic=t, target_partition=p,
                                  source_start=start_s, source_end=src.high, target_start=start_t,
                                  target_end=dst.high, source_stable_end=(stable or {}).get(TP(s, p))))
    return ranges


def group_snapshot(clients: Clients, out_dir: Path, expected: list[ExpectedOffset] | pa.Table,
                   extra_actual: dict[str, dict[str, dict[TP, int]]] | None = None) -> GroupSnapshot:
    """Committed offsets and watermarks, read now from the Kafka clusters the expectation names;
    `extra_actual` adds rows that are not consumer groups (a connector's offsets, as read back)."""
    expected = expected_table(expected)
    groups: dict[str, set[str]] = {}
    tps: dict[str, set[tuple[str, int]]] = {}  # a TP is a tuple: a TP each is made for the distinct ones only
    for cluster, group, topic, partition in zip(*(expected.column(n).to_pylist() for n in (
            "cluster", "group", "topic", "partition"))):
        if cluster in (extra_actual or {}):
            continue
        groups.setdefault(cluster, set()).add(group)
        tps.setdefault(cluster, set()).add((topic, partition))
    actual: dict[str, dict[str, dict[TP, int]]] = {}
    marks = {}
    for cluster, gs in groups.items():
        admin = clients.admin(cluster)
        actual[cluster] = admin.committed_offsets(sorted(gs))
        for offs in actual[cluster].values():
            tps[cluster].update(offs)
        existing = admin.topics(include_internal=True)
        marks[cluster] = admin.watermarks(sorted(TP(*tp) for tp in tps[cluster] if tp[0] in existing))
    return write_group_snapshot(out_dir, expected, {**actual, **(extra_actual or {})}, marks)


def record_verdict(rb: Runbook, flow: str, summary: ParitySummary, check: str, engine: str | None = None) -> None:
    """Audit the job's verdict (counts, failing rows, where it ran) and raise when it failed."""
    with rb.step(f"parity.{summary.app}", flow) as step:
        step.note(check=check, engine=engine, status=summary.status, counts=summary.counts, totals=summary.totals,
                  failures=[f.model_dump() for f in summary.failures[:50]], failures_total=summary.failures_total,
                  output=summary.output, elapsed_s=summary.elapsed_s)
        step.settle({"passed": summary.passed})
        summary.check()


# -- what the proof established, for the report ---------------------------------------------------------
PROOF_ROW_KEYS = ("group", "source_topic", "source_partition", "target_topic", "source_committed", "target_offset",
                  "true_offset", "plan_offset", "status", "n", "differs_from_plan")
LISTED_PROOF_ROWS = 200


UNPROVABLE_UNPLANNED = ("the source cluster cannot be read (unplanned): where each group resumes is the "
                       "plan's position, from MM2's checkpoints and what was known before, not proven by records")


def move_proof(rb: Runbook, plan: TranslationPlan | None = None) -> dict[str, Any]:
    """The groups' positions as the record proof of this run established them from both clusters' records
    (the report leads with these; the plan's figures stand beside them). Without a record proof the
    report's figures are the plan's, and it says so; an unplanned move cannot have one — each of its rows
    is UNPROVABLE, with the reason, counted apart and never OK."""
    events = [e for e in rb.audit.events(run_id=rb.info.run_id)
              if e.kind == "step" and e.action == "step.parity.record_parity"]
    verdicts = [e for e in events if e.details.get("status") in ("passed", "failed") and e.details.get("output")]
    boundaries = Path(verdicts[-1].details["output"]) / "boundaries" if verdicts else None
    rows: list[dict[str, Any]]  # one a group-partition, as the report lists them
    if (boundaries is None or not boundaries.exists()) and plan is not None and plan.mode == "unplanned":
        rows = [{"group": r.group, "source_topic": r.source_topic, "source_partition": r.partition,
                 "target_topic": r.target_topic, "source_committed": r.source_offset, "target_offset": None,
                 "true_offset": None, "plan_offset": r.offset, "status": "UNPROVABLE", "n": None,
                 "differs_from_plan": False} for r in plan.all_rows()]
        return {"source": "unprovable", "note": UNPROVABLE_UNPLANNED, "status": "unprovable",
                "totals": {"rows": len(rows), "re_read": 0, "skipped": 0, "unprovable": len(rows), "missing": 0,
                           "mismatch": 0, "differs_from_plan": 0},
                "rows": rows[:LISTED_PROOF_ROWS]}
    if boundaries is None or not boundaries.exists():
        return {"source": "plan", "note": "unproven: these figures are the plan's (no record proof in this run)"}
    import pyarrow.parquet as pq

    rows = [{k: r.get(k) for k in PROOF_ROW_KEYS} for r in pq.read_table(boundaries).to_pylist()]

    def count(status: str) -> int:
        return sum(1 for r in rows if r["status"] == status)

    totals = {"rows": len(rows), "re_read": sum(r["n"] for r in rows if r["status"] == "RE-READ"),
              "skipped": sum(r["n"] for r in rows if r["status"] == "SKIP"), "unprovable": count("UNPROVABLE"),
              "missing": count("MISSING"), "mismatch": count("MISMATCH"),
              "differs_from_plan": sum(1 for r in rows if r["differs_from_plan"])}
    # Differences from the plan first, then anything not OK: what an SRE must read before the rest.
    rows.sort(key=lambda r: (not r["differs_from_plan"], r["status"] == "OK", r["group"], r["source_partition"]))
    return {"source": "record_parity", "status": verdicts[-1].details["status"], "totals": totals,
            "rows": rows[:LISTED_PROOF_ROWS]}
