"""`mirrorbook translate`: a flow's consumer-group offsets translated to its target, MM2's way or precisely."""

from __future__ import annotations

import argparse
import json
from typing import Any, get_args

from mirrorbook.clients import Clients, cli_clients
from mirrorbook.connections import PRECEDENCE_HELP, ConnectionInvalid
from mirrorbook.errors import MirrorbookError
from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.mm2 import Translation
from mirrorbook.mm2.counts import Count
from mirrorbook.mm2.internal_topics import OffsetSyncsLocation, read_checkpoints
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.mm2.precise import PartitionTranslation, PreciseReport, translate_precise
from mirrorbook.mm2.remote_cluster_utils import group_matcher
from mirrorbook.replication import backend_for
from mirrorbook.topology import FlowSpec, load_topology

PING_TIMEOUT_S = 5.0  # the source is read only if it answers within this


def register(p: argparse.ArgumentParser) -> None:
    p.epilog = PRECEDENCE_HELP
    p.add_argument("--flow", required=True, help="flow name from the topology, e.g. A->B")
    p.add_argument("--groups", help="consumer groups (regex, whole id must match); default: the flow's managed groups")
    p.add_argument("--mode", choices=get_args(Translation), default="mm2",
                   help="mm2: MM2's checkpoints (one pass for all groups; with the source readable, also each group's "
                        "committed offset and what the checkpoint re-reads and skips); precise: prove the exact record")
    p.add_argument("--offset-syncs-location", choices=get_args(OffsetSyncsLocation),
                   help="where the flow's offset-syncs topic lives (MM2's offset-syncs.topic.location); "
                        "default: what the flow's replication backend says")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--topology", help="topology file (default: $MIRRORBOOK_TOPOLOGY or the package's example)")
    p.set_defaults(func=cmd_translate)


def cmd_translate(args: argparse.Namespace) -> int:
    topology = load_topology(args.topology)
    # The topology's connection ids through the connections file beside it (a secured estate's credentials),
    # else its addresses.
    clients = cli_clients(args.topology, topology)
    flow = topology.flow(args.flow)
    groups = args.groups or topology.groups_regex(flow)
    group_matcher(groups)  # a bad regex fails here, before anything is read
    policy = ReplicationPolicy.for_flow(flow)
    if args.mode == "mm2":
        # MM2's checkpoints alone say where a group would start, not whether that skips: with the source
        # readable, its committed offsets and the records count that (as precise mode does).
        unreadable = _unreadable(clients, flow.source)
        report = None if unreadable else _precise(clients, flow, groups, policy, args)
        out = mm2_offsets(clients, flow, groups, policy, report, unreadable)
        print(json.dumps(out, indent=2) if args.json else _mm2_table(out))
    else:
        report = _precise(clients, flow, groups, policy, args)
        print(report.model_dump_json(indent=2) if args.json else precise_table(report))
    return 0


def _precise(clients: Clients, flow: FlowSpec, groups: str, policy: ReplicationPolicy,
             args: argparse.Namespace) -> PreciseReport:
    return translate_precise(clients.kafka_config(flow.source), clients.kafka_config(flow.target),
                             flow.source, flow.target, groups, policy=policy,
                             offset_syncs_location=syncs_location(clients, flow, args.offset_syncs_location))


def syncs_location(clients: Clients, flow: FlowSpec, override: OffsetSyncsLocation | None = None
                   ) -> OffsetSyncsLocation:
    """`override` (the flag), else where the flow's replication backend keeps its offset-syncs."""
    return override or backend_for(clients, flow).offset_mapping().offset_syncs_location


def _unreadable(clients: Clients, alias: str) -> str | None:
    """Why the cluster cannot be read now, or None when it answers."""
    try:
        admin = KafkaAdmin(clients.kafka_config(alias))
    except ConnectionInvalid:  # a connection is defined, and wrong: said as it is
        raise
    except MirrorbookError:  # no address, and no connection naming one
        return "no bootstrap_servers in the topology"
    return None if admin.ping(timeout_s=PING_TIMEOUT_S) else f"{admin.bootstrap} does not answer"


def mm2_offsets(clients: Clients, flow: FlowSpec, groups: str, policy: ReplicationPolicy,
                report: PreciseReport | None = None, unreadable: str | None = None) -> dict[str, Any]:
    """MM2's checkpoints for the matching groups; with `report` (the source was read), each committed
    (group, partition) too — its committed offset, and what MM2's checkpoint re-reads and skips from there."""
    log = read_checkpoints(clients.kafka_config(flow.target), flow.source, policy=policy,
                           group_filter=group_matcher(groups))
    counted = {(r.group, r.target_topic, r.partition): r for r in report.rows} if report else {}
    rows = []
    for key in sorted(set(log.latest) | set(counted)):
        (g, t, p), cp, r = key, log.latest.get(key), counted.get(key)
        row: dict[str, Any] = {"group": g, "topic": t, "partition": p,
                               "upstream_offset": cp.upstream_offset if cp else None,
                               "offset": cp.downstream_offset if cp else None, "metadata": cp.metadata if cp else None}
        if report is not None:
            row.update(_counted(r))
        rows.append(row)
    out: dict[str, Any] = {"flow": flow.name, "mode": "mm2", "groups_regex": groups, "checkpoints_read": log.records,
                           "malformed_records": log.malformed, "groups": len({r["group"] for r in rows}),
                           "source": flow.source, "source_readable": report is not None, "rows": rows}
    if report is None:
        out["source_unreadable"] = unreadable
    else:
        totals = report.totals  # not `t`: the rows' topic above
        out["totals"] = {"committed_partitions": totals.partitions, "without_checkpoint": totals.without_checkpoint,
                         "re_read": totals.mm2_re_read.model_dump(), "skip": totals.mm2_skip.model_dump(),
                         "skipping": totals.mm2_skipping}
    return out


def _counted(r: PartitionTranslation | None) -> dict[str, Any]:
    """A row's committed offset and what MM2's checkpoint re-reads and skips from it (counted against the
    checkpoint the report read, which a checkpoint written since may have replaced)."""
    if r is None:
        return {"committed": None, "re_read": None, "skip": None, "note": "no committed offset on the source"}
    out: dict[str, Any] = {"committed": r.source_offset, "re_read": None, "skip": None, "note": None}
    if r.mm2_offset is None:
        return out | {"note": "no MM2 checkpoint"}
    assert r.mm2_re_read is not None and r.mm2_skip is not None
    out.update(upstream_offset=r.checkpoint_upstream, offset=r.mm2_offset, re_read=r.mm2_re_read.model_dump(),
               skip=r.mm2_skip.model_dump())
    if r.mm2_skip.may_be_positive:
        out["note"] = r.why_skips(r.mm2_offset, r.mm2_skip)
    return out


def _table(header: list[str], rows: list[list[Any]]) -> str:
    cells = [header] + [["-" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells)


def _count(value: dict[str, Any] | None) -> Count | None:
    return None if value is None else Count.model_validate(value)


def _mm2_table(out: dict[str, Any]) -> str:
    rows = out["rows"]
    head = f"{out['groups']} groups, {len(rows)} partitions from {out['checkpoints_read']} checkpoint records " \
           f"({out['malformed_records']} malformed)"
    if not out["source_readable"]:
        body = _table(["GROUP", "TOPIC", "PARTITION", "CHECKPOINTED-AT", "OFFSET"],
                      [[r["group"], r["topic"], r["partition"], r["upstream_offset"], r["offset"]] for r in rows])
        return (f"{body}\n{head}\n{out['source']} is not readable ({out['source_unreadable']}): the groups' committed "
                "offsets, and so what MM2's checkpoints re-read or skip, are not shown")
    body = _table(["GROUP", "TOPIC", "PARTITION", "COMMITTED", "CHECKPOINTED-AT", "OFFSET", "RE-READ", "SKIP"],
                  [[r["group"], r["topic"], r["partition"], r["committed"], r["upstream_offset"], r["offset"],
                    _count(r["re_read"]), _count(r["skip"])] for r in rows])
    t = out["totals"]
    skipping = [f"  {r['group']} {r['topic']}-{r['partition']}: {r['note']}: skips {skip} record(s)"
                for r in rows if (skip := _count(r["skip"])) is not None and skip.may_be_positive]
    return "\n".join([body, head, f"committed offsets read on {out['source']}: MM2's checkpoints re-read "
                       f"{_count(t['re_read'])} and skip {_count(t['skip'])} records over {t['committed_partitions']} "
                       f"committed partition(s) ({t['without_checkpoint']} without a checkpoint, {t['skipping']} whose "
                       "checkpoint may skip)"] + (["skipping:"] + skipping if skipping else []))


def precise_table(report: PreciseReport) -> str:
    body = _table(["GROUP", "TOPIC", "PARTITION", "SOURCE", "MM2", "MM2-RE-READ", "MM2-SKIP", "PRECISE", "PROOF",
                   "OFFSET", "RE-READ", "SKIP"],
                  [[r.group, r.target_topic, r.partition, r.source_offset, r.mm2_offset, r.mm2_re_read, r.mm2_skip,
                    r.precise_offset, r.proof if r.proven else f"fallback:{r.fallback_rule}", r.offset, r.re_read,
                    r.skip] for r in report.rows])
    t = report.totals
    reasons = sorted({f"  {r.group} {r.target_topic}-{r.partition}: {r.reason}" for r in report.rows if r.reason})
    skipping = [f"  {r.group} {r.target_topic}-{r.partition}: {r.why_skips(r.offset, r.skip)}: skips {r.skip} "
                "record(s)"
                for r in report.rows if r.offset is not None and r.skip.may_be_positive]
    return "\n".join([body, f"{t.groups} groups, {t.partitions} partitions: {t.proven} proven, {t.not_proven} not "
                      f"proven (the highest position that provably skips nothing used); precise mode re-reads "
                      f"{t.re_read} and skips {t.skip} records ({t.skipping} partition(s) where no position on the "
                      f"target skips nothing); MM2's checkpoints would re-read {t.mm2_re_read} and "
                      f"skip {t.mm2_skip} ({t.without_checkpoint} partition(s) without a checkpoint, "
                      f"{t.mm2_skipping} whose checkpoint may skip)"]
                     + (["not proven:"] + reasons if reasons else [])
                     + (["skipping:"] + skipping if skipping else []))
