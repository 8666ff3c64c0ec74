"""Airflow's own connection lookup, for the CLI (`mirrorbook.connections.cli_lookup` asks it second, after
`AIRFLOW_CONN_<ID>`): what a runbook task would be given, as far as a process outside Airflow can ask for it through
Airflow's public interfaces.

1. The secrets backend (and `AIRFLOW_CONN_<ID>` again, a no-op by then): the Task SDK's `BaseHook.get_connection`,
   which outside a task consults `[workers] secrets_backend` (else `[secrets] backend`) and the environment —
   Airflow's own order for such a process.
2. The metadata DB: Airflow 3 gives its connections to tasks through its API server only, and its REST API
   redacts passwords, so it is read with Airflow's own CLI, `airflow connections export` (one subprocess, at the
   first id the backend does not define; its output — Airflow's import form, passwords included — goes through a
   pipe into memory, never to a file, a log or a command line).

Airflow is imported only when a connection is asked of this source, so a command whose every id is in the
environment never pays for it (importing the Task SDK costs seconds).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator
from mirrorbook.bounds import cut, quoted
from mirrorbook.connections import FileConnection, connections_of, from_fields
from mirrorbook.errors import MirrorbookError

EXPORT_TIMEOUT_S = 180.0  # Airflow's CLI imports every provider: seconds when idle, minutes on a host under load
# Settings that make an Airflow installation "configured" without an airflow.cfg (a container's environment).
CONFIG_VARS = ("AIRFLOW__SECRETS__BACKEND", "AIRFLOW__WORKERS__SECRETS_BACKEND", "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN")


def config_file() -> Path:
    """Airflow's configuration file: `$AIRFLOW_CONFIG`, else `airflow.cfg` in `$AIRFLOW_HOME` (~/airflow)."""
    if os.environ.get("AIRFLOW_CONFIG"):
        return Path(os.path.expandvars(os.environ["AIRFLOW_CONFIG"])).expanduser()
    return Path(os.path.expandvars(os.environ.get("AIRFLOW_HOME", "~/airflow"))).expanduser() / "airflow.cfg"


def configured() -> bool:
    """Airflow here has been set up (its airflow.cfg exists, or the environment names a secrets backend or a
    metadata DB): only then is it asked. A merely installed Airflow has no connections to give."""
    return config_file().is_file() or any(os.environ.get(v) for v in CONFIG_VARS)


@contextlib.contextmanager
def _cli_logging_kept() -> Iterator[None]:
    """Importing Airflow configures logging for an Airflow process (its handlers; loggers that exist already,
    mirrorbook's among them, disabled): put back the command's own (`mirrorbook -v`)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    ours = {name: lg.disabled for name, lg in logging.root.manager.loggerDict.items()
            if name.startswith("mirrorbook") and isinstance(lg, logging.Logger)}
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        for name, disabled in ours.items():
            logging.getLogger(name).disabled = disabled


class AirflowSource:
    """Airflow's secrets backend, then its metadata DB (see the module docstring)."""

    def __init__(self) -> None:
        self._db: dict[str, FileConnection] | None = None
        self._db_error: str | None = None

    def get(self, conn_id: str) -> FileConnection | None:
        return self._backend(conn_id) or self._metadata_db().get(conn_id)

    def where(self, conn_id: str) -> str:
        db = f"Airflow's metadata DB ({self._db_error})" if self._db_error else "Airflow's metadata DB"
        return f"Airflow's secrets backend, then {db} (Airflow configured by {config_file()})"

    def _backend(self, conn_id: str) -> FileConnection | None:
        # Airflow logs its warnings to stdout, which is the command's output (`mirrorbook flows --json`): they go
        # to stderr while Airflow is imported and asked; and the logging Airflow sets up is the CLI's again after.
        with contextlib.redirect_stdout(sys.stderr), _cli_logging_kept():
            from airflow.sdk import BaseHook
            from airflow.sdk.exceptions import AirflowNotFoundException

            try:
                conn = BaseHook.get_connection(conn_id)
            except AirflowNotFoundException:
                return None
            except Exception as exc:  # e.g. the backend denied it: its type and words (Airflow's, never a secret)
                raise MirrorbookError(f"Airflow's secrets backend refused or failed to give connection "
                                      f"{quoted(conn_id)}: {type(exc).__name__}: {cut(str(exc))}") from exc
        return from_fields(conn_id, "Airflow's secrets backend",
                           conn_type=conn.conn_type, host=conn.host, port=conn.port, schema=conn.schema,
                           login=conn.login, password=conn.password, extra=conn.extra)

    def _metadata_db(self) -> dict[str, FileConnection]:
        if self._db is None:
            self._db = {}
            try:
                done = subprocess.run([sys.executable, "-m", "airflow", "connections", "export", "-",
                                       "--file-format", "json"], capture_output=True, text=True,
                                      timeout=EXPORT_TIMEOUT_S, check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                self._db_error = (f"not readable: `airflow connections export` did not answer within "
                                  f"{EXPORT_TIMEOUT_S:.0f}s" if isinstance(exc, subprocess.TimeoutExpired) else
                                  f"not readable: `airflow connections export` could not run ({type(exc).__name__})")
                return self._db
            start = done.stdout.find("{")
            try:
                data = json.loads(done.stdout[start:done.stdout.rindex("}") + 1]) if start >= 0 else None
            except ValueError:
                data = None
            if done.returncode != 0 or not isinstance(data, dict):
                # Its last error line says why (no DB, not migrated); connections are printed on stdout only.
                lines = done.stderr.strip().splitlines() or ["no output"]
                said = next((ln for ln in reversed(lines) if re.search(r"\w*Error\b", ln)), lines[-1])
                self._db_error = f"not readable: `airflow connections export` exited {done.returncode}: {cut(said)}"
                return self._db
            self._db = connections_of(data, "Airflow's metadata DB", "Airflow's metadata DB")
        return self._db
