"""Zero secrets anywhere (issue #12 item 3).

After the secured runs — this file sorts after every module here that runs runbooks on the secured stack
(drill, failover and failback with both Spark proofs, health check, offsets, pause/resume, the refusals) — every
place a secret could land is read for each password of the stack, as it is and base64-encoded: the task logs of
those runs, Airflow's database (XCom values, rendered template fields, task instances), the audit store (events,
snapshots, progress, artifacts, metrics), the artifacts (reports, parity inputs, outputs and Spark's logs), the
devstack's own logs and data, the Spark Connect server's logs, and the command line of every process on the
machine. Files that hold secrets by design — the stack's 0600 security/ and config/ files and its
airflow-connections.json — are the only ones not read. Zero hits; a hit names its file and line.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mirrorbook.devstack.stack import DevStack
from tests.dags.conftest import secured_task_logs
from tests.secrets_scan import needles, scan_files, scan_processes

pytestmark = [pytest.mark.airflow, pytest.mark.integration]


def test_no_secret_of_the_secured_stack_lands_anywhere(secured: DevStack, devstack: DevStack, secure_scratch,
                                                      run_dag) -> None:
    others = [p for p in secured_task_logs(secured).glob("*.log") if "zero_secrets" not in p.name]
    if not others:  # this file alone (no other secured test ran): runs of its own, so there is something to read
        for action in ("stop", "resume"):
            run = run_dag("mm2_pause_resume", {"flow": secure_scratch.flow.name, "action": action,
                                               "connectors": "all"})
            assert run.state == "success", run.failure()
    secrets = needles(secured.run_dir)

    run_dir = secured.run_dir
    by_design = [run_dir / "security", run_dir / "config", secured.connections_path]
    roots = [Path(os.environ["AIRFLOW_HOME"]), run_dir, devstack.run_dir / "logs", devstack.run_dir / "spark"]
    hits, files = scan_files(roots, secrets, skip=by_design)
    proc_hits, procs = scan_processes(secrets)
    assert files > 20 and procs > 5, (files, procs)  # it read what it claims to have read
    assert hits + proc_hits == [], "secrets found:\n" + "\n".join(hits + proc_hits)
