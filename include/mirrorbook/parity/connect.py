"""Running a parity app through Spark Connect: the app's own code, in this process, as the server's client.

The standalone apps (spark_apps/) are imported as they are, and their job runs in a remote session with
`parity_common.Arrow` I/O: the snapshots are read here and travel to the server as Arrow tables inside
the plan; the results come back with the answer and are written here. So the server needs no path of
this worker and no shared disk; a warm server answers in seconds where a cold spark-submit takes tens.
Kafka client options (security settings, SASL secrets) reach the server as read options of the session,
never on a command line or in a log line of ours.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator

from mirrorbook.parity.submit import ParitySummary, SparkJobError, SparkSubmitSpec

COMMON = "parity_common"  # the name the apps import their shared plumbing by
# pyspark marks a process as a Spark Connect client in os.environ; every subprocess inherits it.
CLIENT_MARKS = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")
PLAN_CACHE = "spark.connect.session.planCache.enabled"


@contextmanager
def client_mode() -> Iterator[None]:
    """pyspark keeps its "this process is a Spark Connect client" mark in os.environ, which a spark-submit
    started later by the same process (dag.test() runs every task in one) inherits — and its driver then
    tries to be a Connect client too. Keep the mark only while our client work runs."""
    before = {k: os.environ.get(k) for k in CLIENT_MARKS}
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def load_common(apps: str | Path) -> ModuleType:
    """The apps' shared plumbing, `parity_common.py` of the apps directory `apps`."""
    return _load(COMMON, Path(apps) / f"{COMMON}.py")


def load_app(application: str | Path) -> ModuleType:
    """The app file `application` as a module, its `import parity_common` answered by `load_common`."""
    path = Path(application)
    return _load(path.stem, path, _imported_as(COMMON, load_common(path.parent)))


# Each app file's module, executed once per process and kept here rather than in sys.modules: the apps are
# standalone files, not modules of mirrorbook (`mirrorbook.spark_apps` is importable from a wheel, not from a
# checkout run through PYTHONPATH, and the apps import `parity_common` top-level in any case), so a name of ours
# for them in sys.modules would be one no import could mean. Nothing needs them there: they define no
# dataclasses and no Python UDFs (which would look their module up by name).
_loaded: dict[Path, ModuleType] = {}
_lock = threading.Lock()


def _load(name: str, path: Path, running: AbstractContextManager[Any] = nullcontext()) -> ModuleType:
    """The module of `path`, named `name`, its body run (once) inside `running`."""
    with _lock:
        key = path.resolve()
        if key not in _loaded:
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise SparkJobError(f"cannot import the parity app {path}",
                                    "reinstall mirrorbook from its wheel (the apps ship in it as "
                                    "mirrorbook/spark_apps)")
            module = importlib.util.module_from_spec(spec)
            with running:
                spec.loader.exec_module(module)
            _loaded[key] = module
        return _loaded[key]


@contextmanager
def _imported_as(name: str, module: ModuleType) -> Iterator[None]:
    """`import name` gives `module` meanwhile. The apps import their plumbing by the top-level name
    spark-submit's --py-files gives it, and only sys.modules answers that without the apps' directory on
    sys.path for every later import of the process; what the name held before is put back right after."""
    before = sys.modules.get(name)
    sys.modules[name] = module
    try:
        yield
    finally:
        if before is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = before


def session(url: str) -> Any:
    """The process's session on the server (pyspark keeps one per URL; it stays open, and warm), with the server's
    plan cache off for it: a proof's plans carry their snapshots (149,100 rows each at 1,000 groups), and the cache
    kept every query's copy — the second group proof of one session ran a 1 GiB server out of heap (measured)."""
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.remote(url).getOrCreate()
    spark.conf.set(PLAN_CACHE, "false")
    return spark


def close() -> None:
    """End this process's session while its server is up. pyspark otherwise releases it at exit, retrying
    with backoff against a server that may be gone by then (minutes of a process that will not exit)."""
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    with client_mode():
        active = RemoteSession.getActiveSession()
        if active is not None:
            active.stop()


def warm(url: str) -> float:
    """Open the session and run a trivial query, so the server has JIT-compiled and planned something
    before a runbook needs a verdict from it. Returns the seconds it took."""
    import time
    started = time.monotonic()
    with client_mode():
        session(url).range(1).count()
    return time.monotonic() - started


def run(spec: SparkSubmitSpec, url: str) -> ParitySummary:
    """Run the job of `spec` (the same arguments spark-submit would get) on the server at `url`."""
    app = load_app(spec.application)
    common = load_common(Path(spec.application).parent)
    args = app.parse_args(spec.application_args)
    spec.output_dir.mkdir(parents=True, exist_ok=True)
    spec.summary_path.unlink(missing_ok=True)  # a stale summary must never pass for this run's verdict
    # spec.conf is for a spark-submit of our own; the server runs with its own settings (and the session
    # is shared by every job of this process, so no job changes them for the next).
    try:
        with client_mode():
            code = common.run_app(app.APP, args, app.body(args, common.Arrow()), spark=session(url))
    finally:
        spec.forget_secrets()  # the client options reached the server as read options: the file is done
    if not spec.summary_path.is_file():
        raise SparkJobError(f"{spec.name} over Spark Connect ({url.split(';')[0]}) left no summary")
    summary = ParitySummary.model_validate_json(spec.summary_path.read_text())
    return summary.model_copy(update={"exit_code": code})
