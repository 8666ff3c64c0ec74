"""Only `mirrorbook.airflow` imports Airflow: every other module of the package imports with Airflow
unimportable (the CLI, the Spark side and any non-Airflow scheduler depend on it)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap


# Run in a fresh interpreter: the test session has Airflow imported already, and blocking it here would
# be a process-wide side effect on every other test.
PROBE = textwrap.dedent('''
    import importlib, importlib.abc, json, pkgutil, sys, traceback

    class NoAirflow(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "airflow" or name.startswith("airflow."):
                raise ImportError(f"airflow is not importable here (asked for {name})")
            return None

    sys.meta_path.insert(0, NoAirflow())
    import mirrorbook

    ALLOWED = "mirrorbook.airflow"
    imported, failed = [], {}

    def walk(package):
        for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            if info.name == ALLOWED or info.name.startswith(ALLOWED + "."):
                continue
            try:
                module = importlib.import_module(info.name)
            except BaseException:
                failed[info.name] = traceback.format_exc(limit=-3)
                continue
            imported.append(info.name)
            if info.ispkg:
                walk(module)

    walk(mirrorbook)
    airflow_loaded = "airflow" in sys.modules
    try:  # the control: the blocker does block what needs Airflow
        importlib.import_module("mirrorbook.airflow.api.auth")
        blocked = False
    except ImportError:
        blocked = True
    print(json.dumps({"imported": imported, "failed": failed, "airflow": airflow_loaded, "blocked": blocked}))
''')


def _probe() -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_module_outside_mirrorbook_airflow_imports_without_airflow():
    found = _probe()
    assert found["failed"] == {}, "\n".join(f"{name}:\n{tb}" for name, tb in found["failed"].items())
    assert not found["airflow"] and found["blocked"]
    # the walk really covered the package: its core packages and the leaf modules inside them
    for name in ("mirrorbook.cli", "mirrorbook.connect.client", "mirrorbook.core.engine", "mirrorbook.audit.store",
                 "mirrorbook.mm2.flows", "mirrorbook.reports.drill_report", "mirrorbook.devstack.stack"):
        assert name in found["imported"], name
    assert not any(n.startswith("mirrorbook.airflow") for n in found["imported"])


def test_the_plugins_app_lives_under_mirrorbook_airflow():
    assert importlib.util.find_spec("mirrorbook.airflow.api.app") is not None
    assert importlib.util.find_spec("mirrorbook.api") is None


# The seam's direction: runbooks -> replication -> connect / mm2 / kafka. A backend takes the runbook it
# acts in as an argument; importing one must not load a runbook (which is how Connect calls crept back in).
SEAM_PROBE = textwrap.dedent('''
    import importlib, json, pkgutil, sys
    import mirrorbook.replication as replication

    names = [info.name for info in pkgutil.iter_modules(replication.__path__, "mirrorbook.replication.")]
    for name in names:
        importlib.import_module(name)
    runbooks = sorted(m for m in sys.modules if m.startswith("mirrorbook.runbooks"))
    print(json.dumps({"modules": names, "runbooks": runbooks}))
''')


def test_the_replication_backends_import_no_runbook():
    done = subprocess.run([sys.executable, "-c", SEAM_PROBE], capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"mirrorbook.replication.backend", "mirrorbook.replication.mm2_connect",
            "mirrorbook.replication.mm2_connect_states", "mirrorbook.replication.mm2_connect_offsets",
            "mirrorbook.replication.expect"} <= set(found["modules"])
    assert found["runbooks"] == []


def test_a_command_loads_only_its_own_module():
    """`mirrorbook flows` imports mirrorbook.cli.flows and what it needs — not the devstack, the demo or the others."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent('''
        import json, sys
        from mirrorbook.cli import COMMANDS, build_parser
        build_parser(["flows", "--topology", "x.yaml"])
        print(json.dumps(sorted(m for m in sys.modules if m.startswith(("mirrorbook.cli.", "mirrorbook.devstack")))))
    ''')], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == ["mirrorbook.cli.flows"]
