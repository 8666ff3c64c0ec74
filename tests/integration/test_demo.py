"""A newcomer's first steps, as README.md and docs/audit.md write them, against the session's real devstack:
`make demo` (flows replicating, checkpoints for its groups, the Spark Connect server for the parity proofs), the
five-minute tour (flows, translate, a dry-run failover through `airflow dags test`, status), the audit trail that
dry run left, and the local Airflow recipe (the plugin and the DAGs loaded, mirrorbook's task modules preloaded)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mirrorbook.cli.demo import GROUP_POSITIONS, TOPIC_NAMES
from mirrorbook.devstack.stack import DevStack
from tests import docs

pytestmark = pytest.mark.integration

FIRST_STEPS = "tests/integration/test_demo.py::test_a_newcomers_first_steps_run_as_written"
DAG_RUN = re.compile(r"DagRun Finished: dag_id=(\S+), logical_date=[^,]*, run_id=([^,]+),.*?state=(\w+)")


def _set_spark_setting(stack: DevStack, value: bool) -> None:
    state = stack.require()
    state.settings = state.settings.model_copy(update={"spark": value})
    stack.state_path.write_text(state.model_dump_json(indent=2))


def _json_list(output: str) -> list[dict]:
    """The JSON line of a CLI's output (Airflow prints its warnings on stdout too)."""
    return json.loads(next(ln for ln in output.splitlines() if ln.startswith("[")))


class Newcomer:
    """A checkout (this one's Makefile, DAG folder and venv, linked from a scratch directory, so nothing is written
    into the real checkout) and a HOME whose default run dir, ~/.local/state/mirrorbook/devstack, is the session's
    stack — what `make demo` starts and the README's commands read. Each `shell` is a new terminal."""

    def __init__(self, root: Path, stack: DevStack) -> None:
        self.checkout, self.home = root / "checkout", root / "home"
        self.checkout.mkdir()
        for name in ("Makefile", "dags"):
            (self.checkout / name).symlink_to(docs.REPO / name)
        (self.checkout / ".venv").symlink_to(sys.prefix)  # the venv `make test` made (the one running this)
        self.run_dir = self.home / ".local" / "state" / "mirrorbook" / "devstack"
        self.run_dir.parent.mkdir(parents=True)
        self.run_dir.symlink_to(stack.run_dir)

    def shell(self, script: str, timeout: float = 600) -> str:
        done = subprocess.run(["bash", "-euc", script], cwd=self.checkout, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=timeout,
                              env={"HOME": str(self.home), "PATH": "/usr/bin:/bin"})
        assert done.returncode == 0, (script, done.stdout[-6000:])
        return done.stdout


@pytest.mark.airflow
def test_a_newcomers_first_steps_run_as_written(devstack: DevStack, spark_connect, tmp_path: Path) -> None:
    """Each block as written, with these substitutions: `make demo` runs as `make -o install demo` (the install,
    scripts/bootstrap.sh, is the one `make test` ran before this suite); docs/audit.md's EVENT_ID is the first event
    `audit list` shows; `airflow standalone` becomes short-lived commands that load what it would."""
    me = Newcomer(tmp_path, devstack)
    demo = docs.block(FIRST_STEPS, "make demo   # installs everything")
    tour = docs.block(FIRST_STEPS, "airflow dags test")
    audit = docs.block(FIRST_STEPS, "mirrorbook audit")
    recipe = docs.block(FIRST_STEPS, "airflow standalone")
    assert [b.path for b in (demo, tour, audit, recipe)] == ["README.md", "README.md", "docs/audit.md", "README.md"]

    # make demo. Stored settings without Spark, as a stack from an earlier demo has them (its server stays up: the
    # session's): the demo must ask for the server again. Put back whatever happens.
    _set_spark_setting(devstack, False)
    try:
        assert demo.text.count("make demo") == 1
        out = me.shell(demo.text.replace("make demo", "make -o install demo"))
        assert devstack.require().settings.spark, "the demo did not ask for the Spark Connect server"
    finally:
        _set_spark_setting(devstack, True)
    # The session stack (with its Spark Connect server, as `make demo` wants it) was reused, not restarted.
    assert "already running: nothing to start" in out
    assert devstack.require().processes()["spark-connect"].pid == spark_connect.pid
    for flow in ("A->B", "B->A"):
        assert re.search(rf"^{re.escape(flow)}\s+REPLICATING\s", out, re.M), out
    for topic in TOPIC_NAMES:
        assert re.search(rf"^A:demo-{topic}\s+B:A\.demo-{topic}\s+3\s+\d+\s+0$", out, re.M), out
    # Every required group has a checkpoint on every partition: committed offset -> translated offset.
    for name, position in GROUP_POSITIONS.items():
        rows = re.findall(rf"^demo-{name}\s+A\.demo-\S+\s+\d\s+(\d+) -> (\d+|\(none)", out, re.M)
        assert len(rows) == 3 * 3, (name, out)
        if name != "untouched":
            assert all(int(down) <= int(up) for up, down in rows), rows  # conservative, never ahead
    assert re.search(rf"^Spark Connect server: {re.escape(spark_connect.url)} "
                     rf"\({re.escape(spark_connect.master)}, pid {spark_connect.pid}\)$",
                     out, re.M), out
    assert "parity proofs" in out
    assert f"spark_connect_default,\n  written to {me.run_dir}/airflow-connections.json" in out
    assert f"--groups 'demo-.*' --mode precise --topology {me.run_dir}/topology.yaml" in out
    assert "make down" in out  # the default run dir: `make down` stops it

    # The tour, then the audit trail in the same shell (its AIRFLOW_HOME and topology).
    assert audit.text.count("EVENT_ID") == 1
    first_event = """"$(mirrorbook audit list --flow 'A->B' --json | jq -r '.[0].event_id')\""""
    out = me.shell(tour.text + "echo @@audit@@\n" + audit.text.replace("EVENT_ID", first_event))
    tour_out, audit_out = out.split("@@audit@@\n")
    assert re.search(r"^A->B\s+REPLICATING\s", tour_out, re.M), tour_out[-3000:]
    groups = {f"demo-{name}" for name in GROUP_POSITIONS}
    assert groups <= set(re.findall(r"^(demo-\S+)\s+A\.demo-", tour_out, re.M)), tour_out[-3000:]
    assert "precise mode re-reads 0 and skips 0 records" in tour_out, tour_out[-3000:]
    [(dag_id, run_id, state)] = DAG_RUN.findall(tour_out)
    assert (dag_id, state) == ("mm2_failover", "success"), tour_out[-4000:]
    assert "dry run, nothing changed" in tour_out and "plan: 4 group(s), 36 partition(s)" in tour_out
    assert f"topology: {me.run_dir}/topology.yaml" in tour_out  # `devstack status` of the default run dir
    # What the dry run left in $AIRFLOW_HOME/mirrorbook/audit.db: its steps, chained and anchored on the clusters.
    assert "step.failover.translate" in audit_out and f"run={run_id}" in audit_out
    assert audit_out.count("audit trail OK:") == 2 and "anchors OK: the store reaches seq" in audit_out
    assert re.search(r'^\{"action": "step\.params\.validate", "dag_id": "mm2_failover"', audit_out, re.M)
    assert 'no unplanned failover recorded an RPO for flow "A->B"' in audit_out
    assert re.search(r'^  "hash": "[0-9a-f]+",?$', audit_out, re.M)  # `audit show`: one event, as JSON

    # The local Airflow recipe, in a shell of its own: the long-running `airflow standalone` is the one word
    # replaced, by commands that load what it loads and exit (the tour migrated this AIRFLOW_HOME's database).
    assert recipe.text.count("airflow standalone") == 1
    out = me.shell(recipe.text.replace(
        "airflow standalone", "airflow plugins --output json && echo @@ && "
        "airflow dags list --local --output json --columns dag_id && echo @@ && "
        "python -c 'import airflow, sys; print(sorted(sys.modules))'"))
    plugins_out, dags_out, modules_out = out.split("@@")
    # Airflow imported the recipe's local settings, and with them every module a runbook's task uses.
    assert "'mirrorbook.airflow.operators.move'" in modules_out and "'mirrorbook.runbooks.move'" in modules_out
    plugins = {p["name"]: p for p in _json_list(plugins_out)}
    assert "mirrorbook" in plugins, out  # by the package's entry point: the recipe names no plugins folder
    assert [a["url_prefix"] for a in plugins["mirrorbook"]["fastapi_apps"]] == ["/mirrorbook"]
    assert {d["dag_id"] for d in _json_list(dags_out)} >= {"mm2_failover", "mm2_failback", "mm2_offsets",
                                                           "mm2_pause_resume", "mm2_health_check", "dr_drill"}
