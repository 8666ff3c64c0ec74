"""The README's REST recipe and docs/operating.md's `mirrorbook trigger`, as written, against the e2e module's real
`airflow standalone` (the installed wheel, on the secured stack). Their run is the pages' own: an unplanned failover
of A->B. It starts at once — mm2_failover was created unpaused, and nothing here unpauses it — and asks for
approval before its first change; rejected here (the session's A->B must keep replicating), it fails with nothing
changed. Substitutions: this server's address for http://localhost:8080, the admin's password for "…".

(Named to run first among the e2e modules, before any of them triggers mm2_failover.)"""

from __future__ import annotations

import json
import re
import subprocess
import time
from contextlib import contextmanager
from typing import Any, Iterator

import httpx
import pytest

from tests import docs
from tests.e2e.conftest import E2E
from tests.e2e.test_approval_api import _asked, _finished, _hitl
from tests.install import Installed

pytestmark = [pytest.mark.e2e, pytest.mark.airflow, pytest.mark.integration]

REST_RECIPE = "tests/e2e/test_api_recipes.py::test_the_readmes_rest_recipe_starts_a_failover_at_once"
TRIGGER = "tests/e2e/test_api_recipes.py::test_mirrorbook_trigger_waits_on_the_run_it_started"


def _reject(api: httpx.Client, run_id: str, timeout_s: float = 120) -> dict[str, Any]:
    """Waits for the run — the pages' unplanned failover of A->B — to exist and ask for approval; rejects it."""
    deadline = time.monotonic() + timeout_s
    while api.get(f"/api/v2/dags/mm2_failover/dagRuns/{run_id}").status_code == 404:
        assert time.monotonic() < deadline, f"no run {run_id} after {timeout_s} s"
        time.sleep(1)
    asked = _asked(api, "mm2_failover", run_id)
    assert asked["subject"].startswith("Approve the failover of A->B (unplanned)"), asked
    api.patch(_hitl("mm2_failover", run_id), json={"chosen_options": ["Reject"]}).raise_for_status()
    return asked


@contextmanager
def _never_left_waiting(e2e: E2E, run_id: str) -> Iterator[None]:
    """Whatever happens, the run does not stay waiting for an answer, holding A->B's lock for the tests after."""
    try:
        yield
    finally:
        with e2e.client() as api:
            waiting = api.get(f"/api/v2/dags/mm2_failover/dagRuns/{run_id}/hitlDetails",
                              params={"response_received": False})
            if waiting.status_code == 200 and waiting.json().get("hitl_details"):
                api.patch(_hitl("mm2_failover", run_id), json={"chosen_options": ["Reject"]})


def _nothing_changed(e2e: E2E, run_id: str) -> None:
    assert e2e.audit.count_mutating(run_id) == 0
    [decision] = e2e.audit.events(run_id=run_id, action="step.approval.decision")
    assert (decision.user, decision.result, decision.details["answer"]) == ("admin", "refused", ["Reject"])


def test_the_readmes_rest_recipe_starts_a_failover_at_once(e2e: E2E) -> None:
    block = docs.block(REST_RECIPE)
    [run_id] = set(re.findall(r'"dag_run_id": "([^"]+)"', block.text))
    with e2e.client() as api:
        assert api.get("/api/v2/dags/mm2_failover").json()["is_paused"] is False  # as created
    assert block.text.count('"password": "…"') == 1
    script = block.text.replace("http://localhost:8080", e2e.url) \
        .replace('"password": "…"', f'"password": "{e2e.password("admin")}"')
    with _never_left_waiting(e2e, run_id):
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True,
                              timeout=120, env={"PATH": "/usr/bin:/bin"})
        assert done.returncode == 0, done.stderr
        # The trigger's answer (curl prints no newline after it), then `jq .state` of the last call.
        created, end = json.JSONDecoder().raw_decode(done.stdout)
        assert created["dag_run_id"] == run_id and created["conf"]["mode"] == "unplanned", created
        assert json.loads(done.stdout[end:]) in ("queued", "running")
        with e2e.client() as api:
            _reject(api, run_id)  # it ran — a paused DAG would have left it queued — up to the approval
            assert _finished(api, "mm2_failover", run_id) == "failed"
    _nothing_changed(e2e, run_id)


def test_mirrorbook_trigger_waits_on_the_run_it_started(e2e: E2E, installed: Installed) -> None:
    block = docs.block(TRIGGER)
    [run_id] = re.findall(r"--run-id (\S+)", block.text)
    assert block.text.count("MIRRORBOOK_AIRFLOW_PASSWORD=…") == 1
    script = block.text.replace("http://localhost:8080", e2e.url) \
        .replace("MIRRORBOOK_AIRFLOW_PASSWORD=…", f"MIRRORBOOK_AIRFLOW_PASSWORD='{e2e.password('admin')}'")
    env = installed.env({"PATH": ""})  # the installed venv's `mirrorbook`
    waiting = subprocess.Popen(["bash", "-euc", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env)
    try:
        with _never_left_waiting(e2e, run_id), e2e.client() as api:
            _reject(api, run_id)
        out, err = waiting.communicate(timeout=240)
    finally:
        waiting.kill()
    assert waiting.returncode == 1, (out, err)  # `--wait` exits non-zero unless the run succeeded
    assert f"triggered mm2_failover run {run_id} as admin" in err
    assert json.loads(out)["state"] == "failed"
    _nothing_changed(e2e, run_id)
    # The alert fires twice: the same --run-id waits on the existing run — here ended — and starts no second one.
    again = subprocess.run(["bash", "-euc", script], capture_output=True, text=True, timeout=120, env=env)
    assert again.returncode == 1 and f"already triggered mm2_failover run {run_id}" in again.stderr, again.stderr
    with e2e.client() as api:
        runs = api.get("/api/v2/dags/mm2_failover/dagRuns", params={"limit": 100}).json()["dag_runs"]
    assert [r["dag_run_id"] for r in runs].count(run_id) == 1
