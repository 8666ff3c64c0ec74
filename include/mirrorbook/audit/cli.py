"""`mirrorbook audit …`: read, verify and export the audit trail; list snapshots; release a stuck flow lock."""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path
from typing import IO, Any, Iterable

from pydantic import BaseModel

from mirrorbook.audit.codec import format_time
from mirrorbook.audit.database import ENV_URL
from mirrorbook.audit.models import AuditRecord
from mirrorbook.audit.store import AuditStore
from mirrorbook.bounds import shown
from mirrorbook.errors import MirrorbookError
from mirrorbook.mm2.counts import Count


def store_command(parent: argparse._SubParsersAction, name: str, helptext: str, func: Any) -> argparse.ArgumentParser:
    """A subcommand that reads the audit store (`--url` picks which one)."""
    sp = parent.add_parser(name, help=helptext)
    sp.add_argument("--url", help=f"audit database URL or SQLite path (default: ${ENV_URL}, "
                                  "else $AIRFLOW_HOME/mirrorbook/audit.db)")
    sp.set_defaults(func=func)
    return sp


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="the audit trail: list, show, verify, export, snapshots, rpo, unlock")
    au = p.add_subparsers(dest="audit_cmd", required=True)

    common = functools.partial(store_command, au)
    ls = common("list", "events in chain order", cmd_list)
    ls.add_argument("--run-id")
    ls.add_argument("--flow")
    ls.add_argument("--action")
    ls.add_argument("--limit", type=int, help="only the newest N events (default: all)")
    ls.add_argument("--json", action="store_true")

    sh = common("show", "one event, as JSON", cmd_show)
    sh.add_argument("event_id")

    vf = common("verify", "recompute the hash chain; exit 1 at the first broken link", cmd_verify)
    vf.add_argument("--json", action="store_true")
    vf.add_argument("--anchors", nargs="?", const="", metavar="CLUSTERS",
                    help="also check the store against the newest head anchored on these Kafka clusters "
                         "(comma-separated aliases; default: every cluster of the topology). A truncated tail "
                         "fails with the missing sequence range; an unreachable cluster is said, not fatal")
    vf.add_argument("--topology", help="topology file for --anchors (default: $MIRRORBOOK_TOPOLOGY or "
                                       "the package's example); its connection ids are resolved as `mirrorbook "
                                       "flows --help` says")

    ex = common("export", "every event with its hashes, for a reviewer", cmd_export)
    ex.add_argument("--format", choices=["jsonl"], default="jsonl")
    ex.add_argument("--out", help="file to write (default: stdout)")
    ex.add_argument("--run-id")

    sn = common("snapshots", "snapshots taken before mutations", cmd_snapshots)
    sn.add_argument("--flow")
    sn.add_argument("--kind")
    sn.add_argument("--run-id")
    sn.add_argument("--json", action="store_true")

    so = common("snapshot", "one snapshot with its payload, as JSON", cmd_snapshot)
    so.add_argument("snapshot_id")

    rp = common("rpo", "each unplanned failover's RPO: the bound it reported, and the exact figure once known",
                cmd_rpo)
    rp.add_argument("--flow")
    rp.add_argument("--run-id", help="one failover run")
    rp.add_argument("--limit", type=int, help="only the newest N failovers (default: all)")
    rp.add_argument("--json", action="store_true")

    ul = common("unlock", "force-release a flow's runbook lock (audited)", cmd_unlock)
    ul.add_argument("flow", help="e.g. A->B (as sent, or as `audit list` shows it)")
    ul.add_argument("--user", help="who releases it (default: the login name)")


def _store(args: argparse.Namespace) -> AuditStore:
    return AuditStore(args.url)


def _json(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json")


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))


def _table(records: Iterable[AuditRecord]) -> None:
    for r in records:
        mark = "M" if r.mutating else "-"
        error = f"  error: {r.error.splitlines()[0][:100]}" if r.error else ""
        print(f"{r.seq:>6} {format_time(r.ended_at)} {mark} {r.result:<8} {r.kind:<4} {r.action:<24} "
              f"flow={r.flow or '-'} run={r.run_id or '-'} task={r.task_id or '-'}{error}{_rpo_note(r)}")


def _rpo_note(r: AuditRecord) -> str:
    """An unplanned failover's RPO events carry their figure in the listing (`audit rpo` shows both in full)."""
    if r.action == "rpo.bound" and isinstance(r.details.get("rpo"), dict):
        return f"  rpo: at least {r.details['rpo'].get('records')} (lower bound)"
    if r.action == "rpo.exact" and isinstance(r.details.get("records"), dict):
        return f"  rpo: {Count.model_validate(r.details['records'])} (counted by run {r.details.get('computed_by_run_id')})"
    return ""


def cmd_list(args: argparse.Namespace) -> int:
    store = _store(args)
    records = store.events(run_id=args.run_id, flow=args.flow, action=args.action, limit=args.limit,
                           newest_first=args.limit is not None)
    records.sort(key=lambda r: r.seq)
    if args.json:
        _print_json([_json(r) for r in records])
    else:
        _table(records)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    _print_json(_json(_store(args).get(args.event_id)))
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    store = _store(args)
    result = store.verify()
    anchored = _anchor_check(store, args) if args.anchors is not None else None
    if args.json:
        _print_json(_json(result) | ({"anchors": _json(anchored)} if anchored else {}))
    else:
        print(result.summary(), file=sys.stdout if result.ok else sys.stderr)
        if anchored:
            print(anchored.summary(), file=sys.stdout if anchored.ok else sys.stderr)
    return 0 if result.ok and (anchored is None or anchored.ok) else 1


def _anchor_check(store: AuditStore, args: argparse.Namespace) -> Any:
    # Kafka only when asked: the store and the rest of this CLI work without a topology.
    from mirrorbook.audit.anchors import check_store
    from mirrorbook.clients import cli_clients
    from mirrorbook.topology import load_topology

    topology = load_topology(args.topology)
    aliases = [a.strip() for a in args.anchors.split(",") if a.strip()] or sorted(topology.clusters)
    unknown = [a for a in aliases if a not in topology.clusters]
    if unknown:
        raise MirrorbookError(f"--anchors names cluster(s) the topology does not define: {shown(', '.join(unknown))}",
                              f"name some of: {', '.join(sorted(topology.clusters))}")
    return check_store(store, cli_clients(args.topology, topology), aliases)


def _write_jsonl(records: Iterable[AuditRecord], out: IO[str]) -> int:
    n = 0
    for r in records:
        out.write(json.dumps(_json(r), sort_keys=True, ensure_ascii=False) + "\n")
        n += 1
    return n


def cmd_export(args: argparse.Namespace) -> int:
    records = _store(args).iter_events(run_id=args.run_id)
    if not args.out:
        _write_jsonl(records, sys.stdout)
        return 0
    with Path(args.out).open("w", encoding="utf-8") as f:
        n = _write_jsonl(records, f)
    print(f"exported {n} events to {args.out}", file=sys.stderr)
    return 0


def cmd_snapshots(args: argparse.Namespace) -> int:
    found = _store(args).snapshots(flow=args.flow, kind=args.kind, run_id=args.run_id)
    if args.json:
        _print_json([_json(s) for s in found])
        return 0
    for s in found:
        note = f"  note: {s.note}" if s.note else ""
        print(f"{s.snapshot_id} {format_time(s.created_at)} {s.kind:<20} flow={s.flow or '-'} "
              f"subject={s.subject} run={s.run_id or '-'} {s.size}B{note}")
    return 0


def cmd_snapshot(args: argparse.Namespace) -> int:
    _print_json(_json(_store(args).snapshot(args.snapshot_id)))
    return 0


def cmd_rpo(args: argparse.Namespace) -> int:
    # The figures' wording lives with the runbook that counts them.
    from mirrorbook.runbooks import rpo

    rows = rpo.history(_store(args), flow=args.flow, run_id=args.run_id, limit=args.limit)
    if args.json:
        _print_json(rows)
        return 0
    if not rows:
        print("no unplanned failover recorded an RPO" + (f" for flow {shown(args.flow)}" if args.flow else ""))
    for r in rows:
        bound = r["bound"] or {}
        known = rpo.render_known_lost(bound)
        print(f"failover run {r['failover_run_id']} flow={r['flow']} started {r['failover_started_at']}\n"
              f"  bound: at least {bound.get('records')} record(s) never reached the target — basis: "
              f"{bound.get('basis')}\n" + (f"  {known}\n" if known else "") + f"  {rpo.render_exact(r['exact'])}")
    return 0


def cmd_unlock(args: argparse.Namespace) -> int:
    previous = _store(args).force_unlock(args.flow, user=args.user)
    if previous is None:
        print(f"flow {args.flow} was not locked")
    else:
        print(f"flow {args.flow} unlocked (was held by {previous.describe()})")
    return 0
