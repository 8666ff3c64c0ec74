"""What every mirrorbook task imports, imported once in the long-lived Airflow process its task processes are
forked from. A deployment turns it on with one line in `$AIRFLOW_HOME/config/airflow_local_settings.py`
(which every Airflow process imports as it starts, the scheduler before it forks its executor's workers):

    import mirrorbook.airflow.preload

Why: under LocalExecutor each task runs in a process forked from the executor's worker, and that process then
loads the DAG file — mirrorbook's modules and the libraries they use (confluent-kafka, httpx, pydantic models,
SQLAlchemy): ~0.3 s a task, paid a dozen times on a failover's critical path. Imported before the fork, a task
finds them loaded. The price: a change to mirrorbook's code reaches tasks after the scheduler restarts, as a
change to any module the scheduler imported does.

Not preloaded: the plugin's web app (FastAPI; the API server loads it), the devstack (a development tool) and the
command line;
the Spark clients stay imported by the proof tasks themselves (gRPC channels do not survive a fork).
"""

from __future__ import annotations

import importlib
import pkgutil

import mirrorbook

# Packages a task never imports, or must not import before a fork.
SKIPPED = ("mirrorbook.airflow.api", "mirrorbook.devstack", "mirrorbook.cli")


def preload() -> list[str]:
    """Import every module of mirrorbook a task may use; returns their names."""
    names = []
    for info in pkgutil.walk_packages(mirrorbook.__path__, "mirrorbook."):
        if any(info.name == s or info.name.startswith(s + ".") for s in SKIPPED) or info.name.endswith("__main__"):
            continue
        importlib.import_module(info.name)
        names.append(info.name)
    return names


PRELOADED = preload()
