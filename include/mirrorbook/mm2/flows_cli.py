"""`mirrorbook flows`: every flow of the topology with its KIP-1144 state, connectors and lag."""

from __future__ import annotations

import argparse
import asyncio
import json

from mirrorbook.clients import cli_clients
from mirrorbook.connections import PRECEDENCE_HELP
from mirrorbook.mm2.flows import FlowStatus
from mirrorbook.replication import all_status


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("flows", help="flows with KIP-1144 state, connector/task states and replication lag",
                       epilog=PRECEDENCE_HELP)
    p.add_argument("--topology", help="topology file (default: $MIRRORBOOK_TOPOLOGY or the package's example)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--partitions", action="store_true", help="also print lag per partition")
    p.set_defaults(func=cmd_flows)


def render(statuses: list[FlowStatus], partitions: bool = False) -> str:
    head = f"{'FLOW':<10} {'STATE':<16} {'SOURCE':<12} {'CHECKPOINT':<12} {'HEARTBEAT':<12} {'TASKS':<7} " \
           f"{'LAG':>8} {'MAX':>6}  TOPICS"
    lines = [head]
    for s in statuses:
        c = s.connectors
        tasks = "/".join(str(c[r].tasks_running) for r in ("source", "checkpoint", "heartbeat"))
        known = s.unreadable is None  # an UNKNOWN flow's lag is not known: never shown as a figure
        lines.append(f"{s.flow:<10} {s.state.value:<16} {c['source'].state:<12} {c['checkpoint'].state:<12} "
                     f"{c['heartbeat'].state:<12} {tasks if known else '?':<7} {s.total_lag if known else '?':>8} "
                     f"{s.max_lag if known else '?':>6}  {len(s.replicated_topics)}")
        for err in s.errors:  # the cause of an UNKNOWN state first
            lines.append(f"{'':<10} ! {err}")
        if s.unreadable is not None and s.unreadable.fix:
            lines.append(f"{'':<10}   fix: {s.unreadable.fix}")
        if partitions:
            for p in s.lag:
                lines.append(f"{'':<10}   {p.topic}-{p.partition} -> {p.remote_topic}: hw={p.high_watermark} "
                             f"replicated={p.replicated_offset} lag={p.lag}")
    return "\n".join(lines)


def cmd_flows(args: argparse.Namespace) -> int:
    clients = cli_clients(args.topology)
    statuses = asyncio.run(all_status(clients))
    if args.json:
        print(json.dumps([s.model_dump(mode="json", by_alias=True) for s in statuses], indent=2))
    else:
        print(render(statuses, args.partitions))
    return 0 if all(s.state.value == "REPLICATING" for s in statuses) else 1
