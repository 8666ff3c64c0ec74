"""Where runbooks put the files they leave behind (offsets listings, reports, parity snapshots)."""

from __future__ import annotations

import os
from pathlib import Path


def artifacts_dir() -> Path:
    """`MIRRORBOOK_ARTIFACTS_DIR`, default `$AIRFLOW_HOME/mirrorbook/artifacts`."""
    if os.environ.get("MIRRORBOOK_ARTIFACTS_DIR"):
        return Path(os.environ["MIRRORBOOK_ARTIFACTS_DIR"])
    home = os.environ.get("AIRFLOW_HOME") or str(Path.home() / "airflow")
    return Path(home) / "mirrorbook" / "artifacts"


def safe_name(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)
