"""Default per-user locations: the jar cache and the run dir."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    if os.environ.get("MIRRORBOOK_CACHE"):
        return Path(os.environ["MIRRORBOOK_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mirrorbook"


def default_run_dir() -> Path:
    if os.environ.get("MIRRORBOOK_RUN_DIR"):
        return Path(os.environ["MIRRORBOOK_RUN_DIR"])
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "mirrorbook" / "devstack"
