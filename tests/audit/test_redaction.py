"""The store redacts everything it writes, whatever the caller passes (the rules themselves:
tests/unit/test_redaction.py)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from mirrorbook.audit import AuditStore, LockHolder
from tests.unit.test_redaction import JAAS, SECRET, _dirty


def test_nothing_secret_reaches_the_database(store: AuditStore, raw) -> None:
    store.record(action="connector.config", kind="call", result="error", mutating=True, run_id="r", flow="A->B",
                 request={"method": "PUT", "path": f"http://admin:{SECRET}@connect:8083/connectors/x/config",
                          "body": _dirty()},
                 state_before=_dirty(), state_after=[_dirty()], details=_dirty(),
                 user=f"sasl.jaas.config={JAAS}", task_id=f"KAFKA_SASL_PASSWORD={SECRET}",
                 error=f"401 for http://admin:{SECRET}@connect:8083 with password={SECRET}; config: "
                       + json.dumps({"connector.config": JAAS}))
    store.save_snapshot("connector.config", "A->B", "x", _dirty(), run_id="r", note=f"token={SECRET}")
    store.progress_set("r", "config", _dirty())
    store.record_metrics("A->B", datetime.now(timezone.utc), _dirty())
    store.record_artifact("report", "r", f"http://u:{SECRET}@files/report.html", _dirty())
    store.acquire_lock("A->B", LockHolder(run_id="r", user=f"http://u:{SECRET}@x"))
    dump = repr([raw(f"SELECT * FROM {t}") for t in
                 ("audit_events", "audit_snapshots", "audit_run_progress", "audit_metrics", "audit_artifacts",
                  "audit_flow_locks")])
    assert SECRET not in dump
    assert "***" in dump
    assert store.verify().ok
