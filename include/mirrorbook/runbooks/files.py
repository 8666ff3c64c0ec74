"""Where runbooks put the files they leave behind (offsets listings, reports, parity snapshots)."""

from __future__ import annotations

from pathlib import Path

from mirrorbook import settings


def artifacts_dir() -> Path:
    """The `artifacts_dir` setting, default `$AIRFLOW_HOME/mirrorbook/artifacts`."""
    configured = settings.ARTIFACTS_DIR.get()
    return Path(configured) if configured else settings.airflow_home() / "mirrorbook" / "artifacts"


def safe_name(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)
