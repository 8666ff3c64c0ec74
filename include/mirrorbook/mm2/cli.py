"""`mirrorbook translate`: a flow's consumer-group offsets translated to its target, MM2's way or precisely."""

from __future__ import annotations

import argparse
import json
from typing import Any, get_args

from mirrorbook.clients import Clients, TopologyResolver
from mirrorbook.errors import MirrorbookError
from mirrorbook.mm2 import Translation
from mirrorbook.mm2.internal_topics import OffsetSyncsLocation, read_checkpoints
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.mm2.precise import PreciseReport, translate_precise
from mirrorbook.mm2.remote_cluster_utils import group_matcher
from mirrorbook.topology import FlowSpec, Topology, load_topology


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("translate", help="translate consumer-group offsets of a flow to its target cluster")
    p.add_argument("--flow", required=True, help="flow name from the topology, e.g. A->B")
    p.add_argument("--groups", help="consumer groups (regex, whole id must match); default: the flow's managed groups")
    p.add_argument("--mode", choices=get_args(Translation), default="mm2",
                   help="mm2: MM2's checkpoints (one pass for all groups); precise: prove the exact record")
    p.add_argument("--offset-syncs-location", choices=get_args(OffsetSyncsLocation),
                   help="where the flow's offset-syncs topic lives (MM2's offset-syncs.topic.location); "
                        "default: what the flow's replication backend says")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--topology", help="topology file (default: $MIRRORBOOK_TOPOLOGY or include/topology.yaml)")
    p.set_defaults(func=cmd_translate)


def _bootstrap(topology: Topology, alias: str) -> str:
    servers = topology.clusters[alias].bootstrap_servers
    if not servers:
        raise MirrorbookError(f"Cluster {alias!r} has no bootstrap_servers in the topology",
                              "add bootstrap_servers for it (the CLI does not read Airflow connections)")
    return servers


def cmd_translate(args: argparse.Namespace) -> int:
    topology = load_topology(args.topology)
    flow = topology.flow(args.flow)
    groups = args.groups or topology.groups_regex(flow)
    group_matcher(groups)  # a bad regex fails here, before anything is read
    policy = ReplicationPolicy.for_flow(flow)
    if args.mode == "mm2":
        out = mm2_offsets(topology, flow, groups, policy)
        print(json.dumps(out, indent=2) if args.json else _mm2_table(out))
    else:
        report = translate_precise(_bootstrap(topology, flow.source), _bootstrap(topology, flow.target),
                                   flow.source, flow.target, groups, policy=policy,
                                   offset_syncs_location=syncs_location(topology, flow, args.offset_syncs_location))
        print(report.model_dump_json(indent=2) if args.json else precise_table(report))
    return 0


def syncs_location(topology: Topology, flow: FlowSpec, override: OffsetSyncsLocation | None = None
                   ) -> OffsetSyncsLocation:
    """`override` (the flag), else where the flow's replication backend keeps its offset-syncs."""
    return override or Clients(TopologyResolver(topology)).replication(flow).offset_mapping().offset_syncs_location


def mm2_offsets(topology: Topology, flow: FlowSpec, groups: str, policy: ReplicationPolicy) -> dict[str, Any]:
    log = read_checkpoints(_bootstrap(topology, flow.target), flow.source, policy=policy,
                           group_filter=group_matcher(groups))
    rows = [{"group": g, "topic": t, "partition": p, "upstream_offset": cp.upstream_offset,
             "offset": cp.downstream_offset, "metadata": cp.metadata}
            for (g, t, p), cp in sorted(log.latest.items())]
    return {"flow": flow.name, "mode": "mm2", "groups_regex": groups, "checkpoints_read": log.records,
            "malformed_records": log.malformed, "groups": len(log.groups()), "rows": rows}


def _table(header: list[str], rows: list[list[Any]]) -> str:
    cells = [header] + [["-" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells)


def _mm2_table(out: dict[str, Any]) -> str:
    body = _table(["GROUP", "TOPIC", "PARTITION", "SOURCE-OFFSET", "OFFSET"],
                  [[r["group"], r["topic"], r["partition"], r["upstream_offset"], r["offset"]] for r in out["rows"]])
    return (f"{body}\n{out['groups']} groups, {len(out['rows'])} partitions from {out['checkpoints_read']} "
            f"checkpoint records ({out['malformed_records']} malformed)")


def precise_table(report: PreciseReport) -> str:
    body = _table(["GROUP", "TOPIC", "PARTITION", "SOURCE", "MM2", "MM2-RE-READ", "MM2-SKIP", "PRECISE", "PROOF",
                   "OFFSET", "RE-READ", "SKIP"],
                  [[r.group, r.target_topic, r.partition, r.source_offset, r.mm2_offset, r.mm2_re_read, r.mm2_skip,
                    r.precise_offset, r.proof if r.proven else f"fallback:{r.fallback_rule}", r.offset, r.re_read,
                    r.skip] for r in report.rows])
    t = report.totals
    reasons = sorted({f"  {r.group} {r.target_topic}-{r.partition}: {r.reason}" for r in report.rows if r.reason})
    return "\n".join([body, f"{t.groups} groups, {t.partitions} partitions: {t.proven} proven, {t.not_proven} not "
                      f"proven (the highest position that provably skips nothing used); precise mode re-reads "
                      f"{t.re_read} and skips {t.skip} records; MM2's checkpoints would re-read {t.mm2_re_read} and "
                      f"skip {t.mm2_skip} ({t.without_checkpoint} partition(s) without a checkpoint, "
                      f"{t.mm2_skipping} whose checkpoint may skip)"]
                     + (["not proven:"] + reasons if reasons else []))
