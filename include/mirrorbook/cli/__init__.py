"""The `mirrorbook` command line: one module per command in this package, imported only when its command runs
(`mirrorbook flows` does not load the devstack, the demo or Airflow's REST client; `--help` loads them all)."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

import mirrorbook
from mirrorbook.errors import MirrorbookError

# command -> its one-line help; the module mirrorbook.cli.<command> adds its arguments (`register(parser)`).
COMMANDS: dict[str, str] = {
    "devstack": "the local Kafka A + B + Connect/MM2 stack",
    "translate": "translate consumer-group offsets of a flow to its target cluster",
    "audit": "the audit trail: list, show, verify, export, snapshots, rpo, unlock",
    "flows": "flows with KIP-1144 state, connector/task states and replication lag",
    "demo": "start the local stack, load a workload on A and show it replicating to B",
    "trigger": "trigger a runbook DAG through Airflow's REST API (and wait for it)",
    "drill": "DR drill reports: list, report",
    "dags": "the runbook DAG files of an Airflow deployment",
}


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given the arguments, with only the command they name filled in (every one without them)."""
    parser = argparse.ArgumentParser(prog="mirrorbook", description="Disaster-recovery runbooks for Kafka replication "
                                     "(MirrorMaker 2 on Kafka Connect), driven by Airflow.")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--version", action="version", version=f"%(prog)s {mirrorbook.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    chosen = next((a for a in argv if not a.startswith("-")), None) if argv is not None else None
    for name, helptext in COMMANDS.items():
        p = sub.add_parser(name, help=helptext)
        if chosen in (None, name) or chosen not in COMMANDS:
            importlib.import_module(f"{__name__}.{name}").register(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args) or 0)
    except MirrorbookError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
