"""`mirrorbook audit …` through the real entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mirrorbook.audit import AuditStore, LockHolder
from mirrorbook.cli import main


def _seed(store: AuditStore) -> list:
    return [store.record(action=a, kind="call", result="ok", mutating=True, run_id=r, flow="A->B", user="alice")
            for a, r in (("connector.stop", "r1"), ("offsets.alter", "r1"), ("connector.resume", "r2"))]


def test_verify_exit_codes(store: AuditStore, audit_url: str, raw, capsys: pytest.CaptureFixture) -> None:
    records = _seed(store)
    assert main(["audit", "verify", "--url", audit_url]) == 0
    assert "audit trail OK: 3 events chained" in capsys.readouterr().out
    raw("UPDATE audit_events SET \"user\" = 'mallory' WHERE seq = 2")
    assert main(["audit", "verify", "--url", audit_url]) == 1
    err = capsys.readouterr().err
    assert f"event {records[1].event_id} seq 2: hash mismatch (row edited)" in err
    assert main(["audit", "verify", "--url", audit_url, "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["broken"]["event_id"] == records[1].event_id


def test_export_jsonl(store: AuditStore, audit_url: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    records = _seed(store)
    out = tmp_path / "audit.jsonl"
    assert main(["audit", "export", "--format", "jsonl", "--out", str(out), "--url", audit_url]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["event_id"] for line in lines] == [r.event_id for r in records]
    assert lines[1]["prev_hash"] == lines[0]["hash"] and lines[0]["started_at"].endswith("Z")
    assert "exported 3 events" in capsys.readouterr().err
    assert main(["audit", "export", "--url", audit_url, "--run-id", "r2"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1


def test_list_and_show(store: AuditStore, audit_url: str, capsys: pytest.CaptureFixture) -> None:
    records = _seed(store)
    assert main(["audit", "list", "--url", audit_url, "--run-id", "r1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and "connector.stop" in out[0] and "offsets.alter" in out[1]
    assert main(["audit", "list", "--url", audit_url, "--limit", "2", "--json"]) == 0
    assert [e["seq"] for e in json.loads(capsys.readouterr().out)] == [2, 3]
    assert main(["audit", "show", records[0].event_id, "--url", audit_url]) == 0
    assert json.loads(capsys.readouterr().out)["hash"] == records[0].hash
    assert main(["audit", "show", "evt-nope", "--url", audit_url]) == 2
    assert 'no audit event "evt-nope"' in capsys.readouterr().err


def test_snapshots_and_unlock(store: AuditStore, audit_url: str, capsys: pytest.CaptureFixture) -> None:
    sid = store.save_snapshot("group.offsets", "A->B", "g1", {"orders-0": 5}, run_id="r1")
    store.save_snapshot("group.offsets", "B->A", "g1", {"orders-0": 6}, run_id="r2")
    assert main(["audit", "snapshots", "--flow", "A->B", "--url", audit_url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith(sid)
    assert main(["audit", "snapshot", sid, "--url", audit_url]) == 0
    assert json.loads(capsys.readouterr().out)["payload"] == {"orders-0": 5}

    store.acquire_lock("A->B", LockHolder(run_id="r1", dag_id="mm2_failover", user="alice"))
    assert main(["audit", "unlock", "A->B", "--user", "oncall", "--url", audit_url]) == 0
    assert "unlocked (was held by run r1 of DAG mm2_failover (triggered by alice)" in capsys.readouterr().out
    assert store.lock_holder("A->B") is None
    assert main(["audit", "unlock", "A->B", "--url", audit_url]) == 0
    assert "was not locked" in capsys.readouterr().out


def test_url_defaults_to_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("MIRRORBOOK_AUDIT_URL", f"sqlite:///{tmp_path / 'env.db'}")
    AuditStore.from_env().record(action="x", kind="step", result="ok")
    assert main(["audit", "verify"]) == 0
    assert "1 events chained" in capsys.readouterr().out
