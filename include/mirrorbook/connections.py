"""Connections outside Airflow: the same `kafka` / `kafka_connect` connections, read from a JSON file.

The file has Airflow's connection-import form (`{conn_id: {"conn_type", "host", "port", "schema", "login",
"password", "extra"}}`) — what `mirrorbook devstack up` writes as `airflow-connections.json`. The CLI resolves
a topology's connection ids through it, as Airflow does through its connections, so a topology that names
connection ids only (a secured estate's: its clients need credentials) works on the command line too. The file
is found through `$MIRRORBOOK_CONNECTIONS`, else beside the topology file.

`settings_from_connection` turns a `kafka_connect` connection (Airflow's or the file's) into `ConnectSettings`;
the Airflow hook uses the same function.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from mirrorbook.booleans import parse_bool
from mirrorbook.bounds import cut
from mirrorbook.connect import ConnectSettings
from mirrorbook.errors import MirrorbookError

CONNECT_CONN_TYPE = "kafka_connect"
FILE_NAME = "airflow-connections.json"
ENV = "MIRRORBOOK_CONNECTIONS"


def _extra(extra: Mapping[str, Any], name: str) -> Any:
    """conn-fields values may be stored plainly or with Airflow's `extra__<type>__` prefix."""
    return extra.get(name, extra.get(f"extra__{CONNECT_CONN_TYPE}__{name}"))


def _verify(value: Any) -> bool | str:
    """True, False, or the path of a CA bundle (anything that is not a yes/no); unset means verify."""
    if value is None or value == "":
        return True
    flag = parse_bool(value)
    return str(value) if flag is None else flag


def settings_from_connection(conn: Any) -> ConnectSettings:
    """A `kafka_connect` connection (anything with host, port, schema, login, password, extra_dejson)."""
    extra = conn.extra_dejson if hasattr(conn, "extra_dejson") else {}
    use_tls = _extra(extra, "use_tls")
    scheme = "https" if parse_bool(use_tls) or conn.schema == "https" else "http"
    host = conn.host or "localhost"
    if "://" in host:  # someone pasted a URL into the host field
        scheme, host = host.split("://", 1)
    url = f"{scheme}://{host}:{conn.port or 8083}"
    kw: dict[str, Any] = {"url": url, "verify": _verify(_extra(extra, "verify"))}
    if conn.login:
        kw.update(username=conn.login, password=conn.password or "")
    for key in ("client_cert", "client_key"):
        if _extra(extra, key):
            kw[key] = _extra(extra, key)
    if _extra(extra, "timeout"):
        kw["timeout_s"] = float(_extra(extra, "timeout"))
    if _extra(extra, "retry_deadline"):
        kw["retry_deadline_s"] = float(_extra(extra, "retry_deadline"))
    return ConnectSettings(**kw)


@dataclass(frozen=True)
class FileConnection:
    """One connection of a connections file, with the attributes of Airflow's `Connection` that we read."""

    conn_id: str
    conn_type: str
    host: str | None = None
    port: int | None = None
    schema: str | None = None
    login: str | None = None
    password: str | None = field(default=None, repr=False)
    extra_dejson: dict[str, Any] = field(default_factory=dict, repr=False)


def load_connections(path: str | Path) -> dict[str, FileConnection]:
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise MirrorbookError(f"Connections file {p} does not exist", f"set {ENV} to an existing file")
    except ValueError as exc:
        raise MirrorbookError(f"Connections file {p} is not valid JSON: {exc.__class__.__name__}")
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise MirrorbookError(f"Connections file {p} must map connection ids to objects (Airflow's import form)")
    out = {}
    for conn_id, spec in data.items():
        extra = spec.get("extra") or {}
        if isinstance(extra, str):
            try:
                extra = json.loads(extra or "{}")
            except ValueError:
                extra = None
        if not isinstance(extra, dict):
            raise MirrorbookError(f"Connections file {p}: connection {cut(conn_id)!r} has an extra that is not a "
                                  "JSON object")
        out[conn_id] = FileConnection(conn_id=conn_id, conn_type=str(spec.get("conn_type", "")),
                                      host=spec.get("host"), port=spec.get("port"), schema=spec.get("schema"),
                                      login=spec.get("login"), password=spec.get("password"), extra_dejson=extra)
    return out


def connections_for(topology_path: str | Path | None) -> dict[str, FileConnection]:
    """The connections the CLI resolves a topology's ids through: `$MIRRORBOOK_CONNECTIONS`, else the
    `airflow-connections.json` beside the topology file, else none (the topology's addresses are used)."""
    env = os.environ.get(ENV)
    if env:
        return load_connections(env)
    from mirrorbook.topology import default_path

    beside = Path(topology_path or default_path()).parent / FILE_NAME
    return load_connections(beside) if beside.is_file() else {}
