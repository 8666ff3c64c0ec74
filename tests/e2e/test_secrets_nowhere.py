"""Zero secrets in the e2e Airflow (issue #12 item 3): after the e2e runs on the secured stack — this file sorts
after every other e2e module — the standalone Airflow's home is read for each password of the stack, as it is
and base64-encoded: its scheduler, triggerer, dag-processor and api-server logs, every task log, its database
(XCom, rendered template fields, task instances, the event log), mirrorbook's audit store and artifacts
(reports, parity inputs, outputs and logs); and the command line of every process on the machine (the
standalone's, its task processes', the devstack's JVMs). Zero hits; a hit names its file and line.
"""

from __future__ import annotations

import uuid

import pytest

from tests.e2e.conftest import E2E
from tests.e2e.test_failover_api import _diagnose, _trigger
from tests.secrets_scan import needles, scan_files, scan_processes

pytestmark = [pytest.mark.e2e, pytest.mark.airflow, pytest.mark.integration]


def test_no_secret_of_the_secured_stack_lands_in_the_e2e_airflow(e2e: E2E, secure_devstack) -> None:
    def task_logs() -> list:
        return [p for p in (e2e.airflow.home / "logs").rglob("*.log") if "dag_id=" in str(p)]

    if not task_logs():  # this file alone: a run of its own over the REST API, so there is a secured run to read
        run_id = f"e2e-scan-{uuid.uuid4().hex[:6]}"
        done = _trigger(e2e, "mm2_pause_resume", {"flow": e2e.ops.flow.name, "action": "resume",
                                                  "connectors": "all"}, run_id)
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{_diagnose(e2e, 'mm2_pause_resume', run_id)}"
    assert task_logs(), "the standalone kept no task log"
    secrets = needles(secure_devstack.run_dir)
    home = e2e.airflow.home.parent  # the standalone's AIRFLOW_HOME, the audit store and the artifacts
    hits, files = scan_files([home], secrets)
    proc_hits, procs = scan_processes(secrets)
    assert files > 20 and procs > 5, (files, procs)
    assert hits + proc_hits == [], "secrets found:\n" + "\n".join(hits + proc_hits)
