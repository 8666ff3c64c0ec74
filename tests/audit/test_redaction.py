"""The store redacts everything it writes, whatever the caller passes."""

from __future__ import annotations

from datetime import datetime, timezone

from mirrorbook.audit import AuditStore, LockHolder
from mirrorbook.audit.redaction import redact, redact_text

SECRET = "hunter2"
JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="{SECRET}";'


def _dirty() -> dict:
    return {
        "connect": f"http://admin:{SECRET}@connect:8083/connectors",
        "sasl.jaas.config": JAAS,
        "consumer.override.sasl.jaas.config": JAAS,
        "ssl.truststore.password": SECRET,
        "nested": [{"Authorization": f"Basic {SECRET}aGVsbG8="}, {"api-key": SECRET}, {"X-Auth-Token": SECRET},
                   {"basic.auth.user.info": f"u:{SECRET}"}, {"ssl.keystore.key": SECRET}],
        "log": f"GET with header Authorization: Bearer {SECRET}abcdef failed; jaas {JAAS}",
        "harmless": "http://connect:8083/connectors?expand=status",
    }


def test_redact_masks_keys_and_embedded_credentials() -> None:
    out = redact(_dirty())
    assert SECRET not in repr(out)
    assert out["connect"] == "http://admin:***@connect:8083/connectors"
    assert out["sasl.jaas.config"] == "***" and out["ssl.truststore.password"] == "***"
    assert out["harmless"] == "http://connect:8083/connectors?expand=status"
    assert redact_text("no secrets: offset=5 partition=2") == "no secrets: offset=5 partition=2"
    assert redact({"password": None}) == {"password": None}


def test_nothing_secret_reaches_the_database(store: AuditStore, raw) -> None:
    store.record(action="connector.config", kind="call", result="error", mutating=True, run_id="r", flow="A->B",
                 request={"method": "PUT", "path": f"http://admin:{SECRET}@connect:8083/connectors/x/config",
                          "body": _dirty()},
                 state_before=_dirty(), state_after=[_dirty()], details=_dirty(),
                 error=f"401 for http://admin:{SECRET}@connect:8083 with password={SECRET}")
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
