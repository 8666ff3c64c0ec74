"""One settings module: Airflow's `[mirrorbook]` section first where Airflow is loaded, else the setting's environment
variable, else its default — read when needed, never at import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from mirrorbook import settings


def test_the_environment_then_the_default(monkeypatch):
    monkeypatch.delenv("MIRRORBOOK_HEALTH_SCHEDULE", raising=False)
    assert settings.HEALTH_SCHEDULE.get({}) == "*/5 * * * *"
    assert settings.HEALTH_SCHEDULE.get({"MIRRORBOOK_HEALTH_SCHEDULE": "  @hourly "}) == "@hourly"
    assert settings.HEALTH_SCHEDULE.get({"MIRRORBOOK_HEALTH_SCHEDULE": "   "}) == "*/5 * * * *"  # blank is unset
    assert settings.AUDIT_URL.get({}) is None


@given(st.text(max_size=40))
def test_any_value_is_returned_stripped_or_is_unset(value):
    got = settings.PARITY_URI.get({"MIRRORBOOK_PARITY_URI": value})
    assert got == (value.strip() or None)


def test_every_setting_has_its_own_key_and_variable_and_is_in_the_table():
    all_settings = [v for v in vars(settings).values() if isinstance(v, settings.Setting)]
    assert len(all_settings) >= 12
    assert len({s.key for s in all_settings}) == len({s.env for s in all_settings}) == len(all_settings)
    for s in all_settings:
        assert s.env == f"MIRRORBOOK_{s.key.upper()}"
        assert f"| `{s.key}` | `{s.env}` |" in (settings.__doc__ or "")


def _probe(code: str, tmp_path: Path, **env: str) -> dict:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120,
                          env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "AIRFLOW_HOME": str(tmp_path / "af"),
                               "PYTHONPATH": os.environ.get("PYTHONPATH", ""), **env})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_inside_airflow_its_mirrorbook_section_wins_and_the_audit_store_can_be_a_connection(tmp_path):
    """A real Airflow configuration (set the way a deployment sets it, AIRFLOW__MIRRORBOOK__*) in a fresh process
    that loaded it: the section's value wins over the MIRRORBOOK_* variable; `audit_conn_id` names an Airflow
    connection whose URI is the store's URL."""
    got = _probe("""
        import json
        import airflow.configuration  # what every Airflow component has loaded
        import mirrorbook.airflow
        from mirrorbook.audit.database import default_url
        from mirrorbook.runbooks.files import artifacts_dir
        print(json.dumps({"artifacts": str(artifacts_dir()), "audit": default_url()}))
    """, tmp_path, AIRFLOW__MIRRORBOOK__ARTIFACTS_DIR=str(tmp_path / "from-airflow"),
        MIRRORBOOK_ARTIFACTS_DIR=str(tmp_path / "from-env"), AIRFLOW__MIRRORBOOK__AUDIT_CONN_ID="audit_db",
        AIRFLOW_CONN_AUDIT_DB="postgresql://mb@db.example:5432/audit")
    assert got == {"artifacts": str(tmp_path / "from-airflow"), "audit": "postgresql://mb@db.example:5432/audit"}


def test_outside_airflow_the_environment_answers_and_airflow_is_not_loaded(tmp_path):
    got = _probe("""
        import json, sys
        import mirrorbook.airflow  # the CLI imports it to look a connection up through Airflow
        from mirrorbook.runbooks.files import artifacts_dir
        print(json.dumps({"artifacts": str(artifacts_dir()), "loaded": "airflow.configuration" in sys.modules}))
    """, tmp_path, AIRFLOW__MIRRORBOOK__ARTIFACTS_DIR=str(tmp_path / "from-airflow"),
        MIRRORBOOK_ARTIFACTS_DIR=str(tmp_path / "from-env"))
    assert got == {"artifacts": str(tmp_path / "from-env"), "loaded": False}
