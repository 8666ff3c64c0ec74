"""Default per-user locations: the run dir (the jar cache's is `mirrorbook.maven.cache_dir`)."""

from __future__ import annotations

import os
from pathlib import Path


def default_run_dir() -> Path:
    if os.environ.get("MIRRORBOOK_RUN_DIR"):
        return Path(os.environ["MIRRORBOOK_RUN_DIR"])
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "mirrorbook" / "devstack"
