"""mirrorbook's settings, in one place.

Each is read when it is needed, never at import (a worker's environment at execute time is what counts): from the
`[mirrorbook]` section of Airflow's configuration where mirrorbook runs inside Airflow (`mirrorbook.airflow`
registers that source; Airflow itself reads `AIRFLOW__MIRRORBOOK__<KEY>` variables, `_cmd` and `_secret` forms
into it), else from the setting's own environment variable (the CLI, Spark, tests), else its default.

| key (`[mirrorbook]`) | environment variable | default |
|---|---|---|
| `topology` | `MIRRORBOOK_TOPOLOGY` | the example topology in the package |
| `connections` | `MIRRORBOOK_CONNECTIONS` | `airflow-connections.json` beside the topology (the CLI's) |
| `audit_url` | `MIRRORBOOK_AUDIT_URL` | `sqlite:///$AIRFLOW_HOME/mirrorbook/audit.db` |
| `audit_conn_id` | `MIRRORBOOK_AUDIT_CONN_ID` | none (an Airflow connection whose URI is the audit store) |
| `artifacts_dir` | `MIRRORBOOK_ARTIFACTS_DIR` | `$AIRFLOW_HOME/mirrorbook/artifacts` |
| `health_schedule` | `MIRRORBOOK_HEALTH_SCHEDULE` | `*/5 * * * *` |
| `rpo_sampler_schedule` | `MIRRORBOOK_RPO_SAMPLER_SCHEDULE` | `*/5 * * * *` |
| `alert_webhook_url` | `MIRRORBOOK_ALERT_WEBHOOK_URL` | none |
| `metrics_token` | `MIRRORBOOK_METRICS_TOKEN` | none |
| `spark_conn_id` | `MIRRORBOOK_SPARK_CONN_ID` | `spark_default` |
| `spark_connect_conn_id` | `MIRRORBOOK_SPARK_CONNECT_CONN_ID` | `spark_connect_default` |
| `parity_uri` | `MIRRORBOOK_PARITY_URI` | none |
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

SECTION = "mirrorbook"

# Where a value may come from before the environment: Airflow's configuration, registered by mirrorbook.airflow.
_sources: list[Callable[[str], str | None]] = []
# How an Airflow connection id becomes a URI (the audit store's `audit_conn_id`), registered the same way.
_connection_uris: list[Callable[[str], str]] = []


def register_source(get: Callable[[str], str | None], connection_uri: Callable[[str], str] | None = None) -> None:
    """Read settings through `get(key)` first (None: not set there). Registering the same function twice is a
    no-op."""
    if get not in _sources:
        _sources.append(get)
    if connection_uri is not None and connection_uri not in _connection_uris:
        _connection_uris.append(connection_uri)


@dataclass(frozen=True)
class Setting:
    key: str
    env: str
    default: str | None = None

    def get(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The value, stripped; None (or the default) when unset or blank. With `environ`, only that mapping is
        read (a subprocess's environment, a test's)."""
        if environ is None:
            for source in _sources:
                value = source(self.key)
                if value is not None and value.strip():
                    return value.strip()
        value = (os.environ if environ is None else environ).get(self.env, "").strip()
        return value or self.default


TOPOLOGY = Setting("topology", "MIRRORBOOK_TOPOLOGY")
CONNECTIONS = Setting("connections", "MIRRORBOOK_CONNECTIONS")
AUDIT_URL = Setting("audit_url", "MIRRORBOOK_AUDIT_URL")
AUDIT_CONN_ID = Setting("audit_conn_id", "MIRRORBOOK_AUDIT_CONN_ID")
ARTIFACTS_DIR = Setting("artifacts_dir", "MIRRORBOOK_ARTIFACTS_DIR")
HEALTH_SCHEDULE = Setting("health_schedule", "MIRRORBOOK_HEALTH_SCHEDULE", "*/5 * * * *")
RPO_SAMPLER_SCHEDULE = Setting("rpo_sampler_schedule", "MIRRORBOOK_RPO_SAMPLER_SCHEDULE", "*/5 * * * *")
ALERT_WEBHOOK_URL = Setting("alert_webhook_url", "MIRRORBOOK_ALERT_WEBHOOK_URL")
METRICS_TOKEN = Setting("metrics_token", "MIRRORBOOK_METRICS_TOKEN")
SPARK_CONN_ID = Setting("spark_conn_id", "MIRRORBOOK_SPARK_CONN_ID", "spark_default")
SPARK_CONNECT_CONN_ID = Setting("spark_connect_conn_id", "MIRRORBOOK_SPARK_CONNECT_CONN_ID", "spark_connect_default")
PARITY_URI = Setting("parity_uri", "MIRRORBOOK_PARITY_URI")


def schedule(setting: Setting) -> str | None:
    """A DAG's schedule setting as Airflow takes it: a cron expression or preset, or None for `none` (manual runs)."""
    value = setting.get() or ""
    return None if value.lower() in ("", "none") else value


def airflow_home() -> Path:
    """Airflow's home, as Airflow finds it ($AIRFLOW_HOME, else ~/airflow): the defaults below live in it."""
    return Path(os.environ.get("AIRFLOW_HOME") or Path.home() / "airflow")


def connection_uri(conn_id: str) -> str:
    """The URI of an Airflow connection, through the source mirrorbook.airflow registered."""
    from mirrorbook.errors import MirrorbookError

    if not _connection_uris:
        raise MirrorbookError(f"the audit store is set as Airflow connection {conn_id!r} ({AUDIT_CONN_ID.env}), "
                              "but Airflow is not here to look it up", f"set {AUDIT_URL.env} to the store's URL")
    return _connection_uris[0](conn_id)
