"""Run progress, metrics history and artifacts: the tables outside the chain."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from mirrorbook.audit import AuditConfigError, AuditStore
from mirrorbook.audit.database import default_url

T0 = datetime(2026, 5, 1, 10, 0, tzinfo=timezone.utc)


def test_progress_set_get_overwrite(store: AuditStore) -> None:
    assert store.progress_get("r1", "groups_written") is None
    assert store.progress_get("r1", "groups_written", default=[]) == []
    store.progress_set("r1", "groups_written", ["g1"])
    store.progress_set("r1", "groups_written", ["g1", "g2"])
    store.progress_set("r1", "stopped", True)
    store.progress_set("r2", "stopped", False)
    assert store.progress_get("r1", "groups_written") == ["g1", "g2"]
    assert store.progress("r1") == {"groups_written": ["g1", "g2"], "stopped": True}
    assert store.events() == []  # progress is not part of the chain


def test_metrics_history_newest_first(store: AuditStore) -> None:
    for i in range(5):
        store.record_metrics("A->B", T0 + timedelta(minutes=i), {"lag": i, "hw": {"orders-0": 100 + i}})
    store.record_metrics("B->A", T0, {"lag": 99})
    assert [m.metrics["lag"] for m in store.metrics("A->B")] == [4, 3, 2, 1, 0]
    assert [m.metrics["lag"] for m in store.metrics("A->B", newest_first=False, limit=2)] == [0, 1]
    window = store.metrics("A->B", since=T0 + timedelta(minutes=1), until=T0 + timedelta(minutes=3))
    assert [m.metrics["lag"] for m in window] == [3, 2, 1]
    latest = store.latest_metrics("A->B")
    assert latest.observed_at == T0 + timedelta(minutes=4) and latest.metrics["hw"] == {"orders-0": 104}
    assert store.latest_metrics("C->D") is None


def test_the_latest_sample_of_a_source_passes_over_newer_ones_of_another(store: AuditStore) -> None:
    store.record_metrics("A->B", T0, {"source": "mm2_health_check", "lag": 1})
    for i in range(3):  # a drill samples every second; one of its samples quotes the other source deeper down
        store.record_metrics("A->B", T0 + timedelta(seconds=i + 1), {"source": "dr_drill", "lag": 10 + i,
                                                                     "of": {"source": "mm2_health_check"}})
    store.record_metrics("B->A", T0 + timedelta(minutes=1), {"source": "mm2_health_check", "lag": 99})
    assert store.latest_metrics("A->B", source="mm2_health_check").metrics["lag"] == 1
    assert store.latest_metrics("A->B", source="dr_drill").metrics["lag"] == 12
    assert store.latest_metrics("A->B", source="mm2%check") is None  # LIKE's wildcards are literal here
    assert [m.metrics["lag"] for m in store.metrics("A->B", source="mm2_health_check")] == [1]


def test_run_results_count_every_end_and_say_each_runs_last(store: AuditStore) -> None:
    store.record_run_result("mm2_failover", "r1", "failed")
    store.record_run_result("mm2_failover", "r1", "success")  # cleared and run again: a second end
    store.record_run_result("mm2_health_check", "h1", "success")
    assert store.run_result("r1") == "success" and store.run_result("nope") is None
    assert store.run_result_counts() == {("mm2_failover", "failed"): 1, ("mm2_failover", "success"): 1,
                                         ("mm2_health_check", "success"): 1}
    assert store.events() == []  # outside the chain, like the metrics history


def test_artifacts(store: AuditStore) -> None:
    a = store.record_artifact("drill.report", "r1", "/reports/r1.html", {"rto_s": 12.5, "skipped": 0})
    store.record_artifact("offsets.list", "r2", "/artifacts/A--B.MirrorSourceConnector.json", {"partitions": 3})
    assert [x.path for x in store.artifacts()] == ["/reports/r1.html", "/artifacts/A--B.MirrorSourceConnector.json"]
    assert store.artifacts(kind="drill.report") == [a]
    assert store.artifacts(run_id="r2")[0].summary == {"partitions": 3}


def test_schema_creation_is_idempotent(audit_url: str) -> None:
    first = AuditStore(audit_url)
    first.record(action="x", kind="step", result="ok")
    second = AuditStore(audit_url)
    assert len(second.events()) == 1 and second.verify().ok


def test_default_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("MIRRORBOOK_AUDIT_URL", raising=False)
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "ah"))
    assert default_url() == f"sqlite:///{tmp_path / 'ah' / 'mirrorbook' / 'audit.db'}"
    AuditStore.from_env().record(action="x", kind="step", result="ok")
    assert (tmp_path / "ah" / "mirrorbook" / "audit.db").exists()
    monkeypatch.setenv("MIRRORBOOK_AUDIT_URL", f"sqlite:///{tmp_path / 'other.db'}")
    assert AuditStore.from_env().events() == []
    monkeypatch.delenv("AIRFLOW_HOME")
    monkeypatch.delenv("MIRRORBOOK_AUDIT_URL")
    assert default_url() == f"sqlite:///{Path(os.path.expanduser('~')) / 'airflow' / 'mirrorbook' / 'audit.db'}"


def test_plain_path_means_sqlite(tmp_path: Path) -> None:
    store = AuditStore(str(tmp_path / "plain.db"))
    assert store.backend == "sqlite" and (tmp_path / "plain.db").exists()


def test_unsupported_backend_is_a_clear_error() -> None:
    with pytest.raises(AuditConfigError, match="'mysql' is not supported"):
        AuditStore("mysql://u:p@h/db")


def test_unreachable_postgres_is_a_clear_error_without_the_password() -> None:
    from mirrorbook.audit import AuditUnavailable

    with pytest.raises(AuditUnavailable) as err:
        AuditStore("postgresql+psycopg2://u:s3cret@127.0.0.1:1/db?connect_timeout=2")
    assert "s3cret" not in str(err.value) and "127.0.0.1" in str(err.value)
