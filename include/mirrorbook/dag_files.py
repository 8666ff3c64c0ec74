"""The DAG files of an Airflow deployment: a two-line file per runbook that builds the DAG the installed package
defines (mirrorbook.airflow.dag_definitions). `mirrorbook dags install DIR` writes them; `dags/` of the repository
is exactly what it writes.

Writing is idempotent: a file already as it should be is left alone, one this command wrote before is brought up to
date, and any other file of that name is refused (never overwritten) unless forced.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from mirrorbook.errors import Refused

# Every DAG mirrorbook defines (tests/unit/test_dag_files.py checks it against mirrorbook.airflow.dag_definitions).
DAG_IDS = ("mm2_failover", "mm2_failback", "mm2_pause_resume", "mm2_offsets", "mm2_health_check",
           "mm2_failover_on_alert", "mm2_rpo_sampler", "dr_drill")
MARK = "# Written by `mirrorbook dags install`"


def stub(dag_id: str) -> str:
    """The DAG file of `dag_id`. Airflow finds the DAG as this module's global `dag` (and parses only files that
    mention both "airflow" and "dag", as this one does)."""
    return (f'"""{dag_id}: defined in the installed mirrorbook package; its documentation is the DAG\'s Docs tab."""\n'
            f"{MARK}: the DAG is mirrorbook.airflow.dag_definitions.{dag_id}.\n"
            f"from mirrorbook.airflow.dag_definitions import {dag_id}\n\n"
            f"dag = {dag_id}.build()\n")


@dataclass(frozen=True)
class Written:
    path: Path
    action: str  # written | updated | unchanged


def install(folder: Path, dag_ids: tuple[str, ...] = DAG_IDS, *, force: bool = False) -> list[Written]:
    """Write the DAG files of `dag_ids` into `folder` (made if missing). Refuses, before writing anything, a file
    of the same name that this command did not write, unless `force`."""
    unknown = [d for d in dag_ids if d not in DAG_IDS]
    if unknown:
        raise Refused(f"unknown DAG {', '.join(map(repr, unknown))}", f"mirrorbook defines {', '.join(DAG_IDS)}")
    plan: list[tuple[Path, str, str]] = []
    foreign: list[Path] = []
    for dag_id in dag_ids:
        path = folder / f"{dag_id}.py"
        text = stub(dag_id)
        current = path.read_text() if path.is_file() else None
        if current == text:
            plan.append((path, text, "unchanged"))
        elif current is None or MARK in current or force:
            plan.append((path, text, "written" if current is None else "updated"))
        else:
            foreign.append(path)
    if foreign:
        raise Refused(f"{', '.join(str(p) for p in foreign)} exist(s) and were not written by mirrorbook",
                      "move them away, or pass --force to overwrite them")
    folder.mkdir(parents=True, exist_ok=True)
    for path, text, action in plan:
        if action != "unchanged":
            path.write_text(text)
    return [Written(path, action) for path, _, action in plan]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dags", help="the runbook DAG files of an Airflow deployment")
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
