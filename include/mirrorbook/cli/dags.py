"""`mirrorbook dags …`: the runbook DAG files of an Airflow deployment (`mirrorbook.dag_files`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from mirrorbook.dag_files import DAG_IDS, install


def register(p: argparse.ArgumentParser) -> None:
    dsub = p.add_subparsers(dest="dags_command", required=True)
    inst = dsub.add_parser("install", help="write the DAG files into an Airflow DAG folder (idempotent)",
                           formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    inst.add_argument("folder", type=Path, help="the DAG folder, e.g. $AIRFLOW_HOME/dags")
    inst.add_argument("--dag", action="append", choices=DAG_IDS, metavar="DAG_ID",
                      help=f"only this DAG (repeatable; default all: {', '.join(DAG_IDS)})")
    inst.add_argument("--force", action="store_true", help="overwrite files of the same name mirrorbook did not write")
    inst.set_defaults(func=_install_cmd)
    lst = dsub.add_parser("list", help="the DAGs mirrorbook defines")
    lst.set_defaults(func=lambda args: print("\n".join(DAG_IDS)))


def _install_cmd(args: argparse.Namespace) -> int:
    for w in install(args.folder, tuple(args.dag or DAG_IDS), force=args.force):
        print(f"{w.action:9} {w.path}")
    return 0
