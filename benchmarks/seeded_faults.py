"""Faults seeded into the scale benchmark's scene after a clean failover with proofs (`failover_scale.py
--seed-faults`), and both proofs run once more over the whole scene: each fault must be caught, named, and nothing
else may fail.

Seeded, with A->B stopped by the failover (nothing of it is copied again):
- in a topic of its own, written on both sides by this code as MM2 would have copied it (same keys, values,
  headers and timestamps), three partitions each with one fault the record proof must find:
  EXTRA (partition 0: a foreign record on the target after the copies), ORDER and EXTRA (partition 1: the copy
  of source offset 12 written once out of order before offsets 10-14, as the suite's tampered mirror does),
  MISSING (partition 2: the target lacks the last 3 records);
- in the scene's own groups on the target: one group-partition committed SKIP records past where the failover
  wrote it (the record proof: SKIP n, found from the records; the group proof: its committed offset changed), and
  one group deleted (both proofs: MISSING, nothing committed on the target).

The record proof reads the scene's ranges and boundaries exactly as the runbook's proof task does
(`runbooks.parity.move_records`: both clusters read now), plus the fault topic's whole partitions; the group
proof checks the failover's plan as written (`move_expectation`, as_written), as the runbook's does. The seeded
topic is deleted on both clusters afterwards; the benchmark's reset deletes the groups on B.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.helpers: how the suite writes records by hand

SKIP = 2
BASE = 10  # records per fault partition before the tampering
CUT = 3


def seed_fault_topic(clients: Any, via: Any, topic: str, remote: str) -> set[tuple]:
    """The fault topic, `topic` on the source and its copy `remote` on the target; the differences the record proof
    must report: (target topic, partition, kind, source offset, target offset)."""
    from tests.helpers import produce_records

    from mirrorbook.kafka.sequenced import record

    clients.admin(via.source).create_topics({topic: 3})
    clients.admin(via.target).create_topics({remote: 3})
    src, dst = clients.kafka_config(via.source), clients.kafka_config(via.target)
    t0 = int(time.time() * 1000)
    rec = lambda p, seq, origin="workload": (record(topic, p, seq, origin=origin), t0 + seq)  # noqa: E731
    # 0: EXTRA — a foreign record on the target after the BASE copies.
    produce_records(src, topic, 0, [rec(0, s) for s in range(BASE)])
    produce_records(dst, remote, 0, [rec(0, s) for s in range(BASE)] + [rec(0, BASE, "foreign")])
    # 1: ORDER and EXTRA — source 0..14; the target holds 0..9, then a copy of 12, then 10..14.
    produce_records(src, topic, 1, [rec(1, s) for s in range(BASE + 5)])
    produce_records(dst, remote, 1, [rec(1, s) for s in range(BASE)] + [rec(1, 12)]
                    + [rec(1, s) for s in range(BASE, BASE + 5)])
    # 2: MISSING — the target lacks the source's last CUT records.
    produce_records(src, topic, 2, [rec(2, s) for s in range(BASE)])
    produce_records(dst, remote, 2, [rec(2, s) for s in range(BASE - CUT)])
    expected = {(remote, 0, "EXTRA", None, BASE), (remote, 1, "ORDER", 12, BASE), (remote, 1, "EXTRA", None, 13),
                *((remote, 2, "MISSING", BASE - CUT + i, None) for i in range(CUT))}
    return expected


def seed_group_faults(clients: Any, plan: Any, via: Any) -> tuple[tuple[str, str, int], str]:
    """On the target: the first exactly placed row with SKIP records after it committed SKIP further; another
    group deleted (the one with the fewest rows). Returns ((group, target topic, partition) moved, the deleted
    group)."""
    from mirrorbook.kafka.types import TP

    c = plan.position_columns()
    admin = clients.admin(via.target)
    rows = [i for i, (o, po) in enumerate(zip(c["offset"], c["precise_offset"])) if po is not None and o == po]
    highs = admin.high_watermarks({TP(c["target_topic"][i], c["partition"][i]) for i in rows})
    moved = next(i for i in rows if c["offset"][i] + SKIP <= highs[TP(c["target_topic"][i], c["partition"][i])])
    group, topic, partition = c["group"][moved], c["target_topic"][moved], c["partition"][moved]
    admin.alter_group_offsets({group: {TP(topic, partition): c["offset"][moved] + SKIP}})
    # The group with the fewest rows: its MISSING rows leave room in the summary's listed failures (200) for the
    # others' lines.
    rows_of = Counter(c["group"])
    gone = min((g for g in rows_of if g != group), key=lambda g: (rows_of[g], g))
    admin.delete_groups([gone])
    return (group, topic, partition), gone


def run(run_id: str, url: str, out: Path) -> dict[str, Any]:
    """Seed, prove, check; the faults caught and missed, each with the proof's own line for it."""
    import pyarrow.parquet as pq

    from mirrorbook.airflow.operators.parity import record_job
    from mirrorbook.audit import AuditStore
    from mirrorbook.clients import Clients, TopologyResolver
    from mirrorbook.core.engine import RunInfo, Runbook
    from mirrorbook.parity import connect, group_parity_job, whole_topic_ranges
    from mirrorbook.runbooks import parity
    from mirrorbook.runbooks.move import load_plan
    from mirrorbook.topology import load_topology

    topology = load_topology()
    via = topology.flow("A->B")
    clients = Clients(TopologyResolver(topology))
    plan = load_plan(Runbook(RunInfo(run_id=run_id), AuditStore.from_env()), rows=False)
    topic = f"sc-faults-{uuid.uuid4().hex[:6]}"
    remote = f"{via.source}.{topic}"
    try:  # the fault topic goes again however this ends
        differences = seed_fault_topic(clients, via, topic, remote)
        (group, g_topic, g_partition), gone = seed_group_faults(clients, plan, via)
        t0 = time.monotonic()
        ranges, boundaries = parity.move_records(clients, plan, via)
        ranges += whole_topic_ranges(topic, remote, *(
            clients.admin(side).watermarks(clients.admin(side).partitions([name]))
            for side, name in ((via.source, topic), (via.target, remote))))
        record = connect.run(record_job(clients, via, out / "record", ranges, boundaries), url)
        record_s = time.monotonic() - t0
        t0 = time.monotonic()
        groups = connect.run(group_parity_job(parity.group_snapshot(
            clients, out / "group" / "snapshot", parity.move_expectation(plan)), out / "group", as_written=True), url)
        group_s = time.monotonic() - t0
    finally:
        for cluster, name in ((via.source, topic), (via.target, remote)):
            for f in clients.admin(cluster).client.delete_topics([name]).values():
                try:
                    f.result()
                except Exception as exc:  # not created: seeding failed before it (that failure is the one raised)
                    print(f"the fault topic {name} on {cluster}: {exc}", file=sys.stderr)

    found = {(d["target_topic"], d["target_partition"], d["kind"], d["source_offset"], d["target_offset"])
             for d in pq.read_table(record.outputs["differences"]).to_pylist()}
    bounds = [b for b in pq.read_table(record.outputs["boundaries"]).to_pylist() if b["failed"]]
    rows = [r for r in pq.read_table(groups.outputs["rows"]).to_pylist() if r["failed"]]
    record_lines = record.failure_message(limit=10_000).splitlines()
    group_lines = groups.failure_message(limit=10_000).splitlines()

    def line(lines: list[str], *words: str) -> str:
        return next((x.strip() for x in lines if all(w in x for w in words)), "(caught; not among the lines listed)")

    skipped = [b for b in bounds if b["group"] == group]
    caught = {
        "EXTRA (a foreign record)": (remote, 0, "EXTRA", None, BASE) in found
        and line(record_lines, f"{remote}-0: EXTRA"),
        "ORDER (a copy out of order)": (remote, 1, "ORDER", 12, BASE) in found and line(record_lines, "ORDER"),
        "EXTRA (the copy twice)": (remote, 1, "EXTRA", None, 13) in found and line(record_lines, f"{remote}-1: EXTRA"),
        f"MISSING ({CUT} records)": differences - found == set() and line(record_lines, f"{remote}-2: MISSING"),
        f"SKIP {SKIP} (record proof)": [(b["status"], b["target_partition"]) for b in skipped] == [
            ("SKIP", g_partition)] and line(record_lines, f"group {group}", f"SKIP {SKIP}"),
        "MISSING group (record proof)": bool([b for b in bounds if b["group"] == gone])
        and all(b["status"] == "MISSING" for b in bounds if b["group"] == gone)
        and line(record_lines, f"group {gone}", "MISSING"),
        "changed committed offset (group proof)": [(r["topic"], r["partition"]) for r in rows if r["group"] == group]
        == [(g_topic, g_partition)] and line(group_lines, f"group {group}"),
        "missing committed offset (group proof)": bool([r for r in rows if r["group"] == gone])
        and all(r["status"] == "MISSING" for r in rows if r["group"] == gone)
        and line(group_lines, f"group {gone}", "MISSING"),
    }
    # Nothing but the seeded faults fails: the scene's 149,100 other rows are clean.
    others = {
        "record differences not seeded": sorted(found - differences, key=str),
        "record boundaries failing, not seeded": [b["group"] for b in bounds if b["group"] not in (group, gone)],
        "group rows failing, not seeded": [r["group"] for r in rows if r["group"] not in (group, gone)],
    }
    return {"caught": {k: v or None for k, v in caught.items()}, "others": others,
            "failures_total": {"record": record.failures_total, "group": groups.failures_total},
            "record_s": round(record_s, 1), "group_s": round(group_s, 1), "record_status": record.status,
            "group_status": groups.status, "seeded": {"topic": topic, "skip": [group, g_topic, g_partition],
                                                      "deleted": gone}}
