"""Connections outside Airflow's tasks: a topology's connection ids resolved the way Airflow resolves them.

The runbooks (Airflow tasks) ask Airflow for their connections. The CLI finds the same `kafka` / `kafka_connect`
connections itself, first found wins:

1. `AIRFLOW_CONN_<ID>` (the id upper-cased) — in either of Airflow's forms, read exactly as Airflow reads them:
   a value starting with `{` is the JSON form (`Connection.from_json`), anything else the URI form
   (`Connection.from_uri` of the Task SDK: `kafka-connect://user:pass@host:8443/https?use_tls=true`, query
   values kept as text, or `?__extra__=<JSON>`). Read here, without Airflow: the shell's variable is what the
   command uses, and Airflow is not even imported when every id is found this way. (Airflow itself asks a
   configured secrets backend before these variables; an id defined in both is the one place the two differ.)
2. Airflow's own lookup, where Airflow is installed and configured (`mirrorbook.airflow.lookup`): its secrets
   backend ([secrets] backend / [workers] secrets_backend) through the Task SDK's public `BaseHook.get_connection`,
   then its metadata DB through Airflow's own `airflow connections export`.
3. The connections file: `$MIRRORBOOK_CONNECTIONS`, else `airflow-connections.json` beside the topology — Airflow's
   connection-import form (`{conn_id: {"conn_type", "host", "port", "schema", "login", "password", "extra"}}`), what
   `mirrorbook devstack up` and `airflow connections export` write.
4. None of them: the address written in the topology (`bootstrap_servers`, `url`), if any.

Where Airflow itself would take a connection from a value it cannot use (a misspelled field, an `extra` that is
not a JSON object, a port that is not a number), it fails later or silently drops the value; here such a value is
refused at once, naming the variable (or file) and the field — never a value: a connection holds secrets.

`settings_from_connection` turns a `kafka_connect` connection (Airflow's or one found here) into `ConnectSettings`;
the Airflow hook uses the same function, so a connection means the same to a task and to the CLI.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence
from urllib.parse import parse_qsl, unquote, urlsplit

from mirrorbook import settings
from mirrorbook.booleans import parse_bool
from mirrorbook.bounds import closest, cut, quoted, unknown_keys
from mirrorbook.connect import ConnectSettings
from mirrorbook.errors import MirrorbookError, Refused

CONNECT_CONN_TYPE = "kafka_connect"
KAFKA_CONN_TYPE = "kafka"
FILE_NAME = "airflow-connections.json"
ENV = settings.CONNECTIONS.env
ENV_PREFIX = "AIRFLOW_CONN_"  # Airflow's (airflow.secrets.environment_variables.CONN_ENV_PREFIX)
# The fields of Airflow's connection (the Task SDK's `Connection`, which its JSON form's keys must name).
FIELDS = ("conn_type", "description", "host", "schema", "login", "password", "port", "extra")
EXTRA_KEY = "__extra__"  # a URI's query key holding the whole extra as JSON (Airflow's Connection.EXTRA_KEY)
# The `kafka_connect` connection's extra fields (the provider's conn-fields), each also accepted with Airflow's
# `extra__kafka_connect__` prefix.
CONNECT_EXTRAS = ("use_tls", "verify", "client_cert", "client_key", "timeout", "retry_deadline")


class ConnectionInvalid(Refused):
    """A connection found for an id that cannot be used as written. Says where it was found and which field is
    wrong — never a value. Refused before anything is asked of a cluster; trying again cannot help."""


def _extra(extra: Mapping[str, Any], name: str) -> Any:
    """conn-fields values may be stored plainly or with Airflow's `extra__<type>__` prefix."""
    return extra.get(name, extra.get(f"extra__{CONNECT_CONN_TYPE}__{name}"))


def _verify(value: Any) -> bool | str:
    """True, False, or the path of a CA bundle (anything that is not a yes/no); unset means verify."""
    if value is None or value == "":
        return True
    flag = parse_bool(value)
    return str(value) if flag is None else flag


def _named(conn: Any) -> str:
    """How messages name a connection: its id and, when known, where it was found."""
    origin = getattr(conn, "origin", "")
    return f"connection {quoted(str(getattr(conn, 'conn_id', '?')))}" + (f" ({origin})" if origin else "")


def _number(conn: Any, extra: Mapping[str, Any], name: str) -> float | None:
    value = _extra(extra, name)
    if value is None or value == "":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not number > 0:  # also NaN
        raise ConnectionInvalid(f"The {_named(conn)} has an extra {quoted(name)} that is not a positive number of "
                                "seconds")
    return number


def check_type(conn: Any, wanted: str, what: str) -> None:
    """Refuse a connection of another type than `wanted` (one without a type is taken as it is)."""
    conn_type = getattr(conn, "conn_type", None)
    if conn_type and conn_type != wanted:
        raise ConnectionInvalid(f"The {_named(conn)} is of type {quoted(conn_type)}, and {what} needs a "
                                f"{quoted(wanted)} connection", f"set its conn_type to {wanted}")


def settings_from_connection(conn: Any) -> ConnectSettings:
    """A `kafka_connect` connection (anything with host, port, schema, login, password, extra_dejson)."""
    check_type(conn, CONNECT_CONN_TYPE, "a Connect cluster")
    extra = conn.extra_dejson if hasattr(conn, "extra_dejson") else {}
    known = [*CONNECT_EXTRAS, *(f"extra__{CONNECT_CONN_TYPE}__{k}" for k in CONNECT_EXTRAS)]
    unknown = unknown_keys(list(extra), known, "extra field")
    if unknown:  # a misspelled `verify` would otherwise mean "trust the system's CAs", and fail far from here
        raise ConnectionInvalid(f"The {_named(conn)}: {unknown}",
                                f"its extra fields are: {', '.join(CONNECT_EXTRAS)}")
    use_tls = _extra(extra, "use_tls")
    scheme = "https" if parse_bool(use_tls) or conn.schema == "https" else "http"
    host = conn.host or "localhost"
    if "://" in host:  # someone pasted a URL into the host field
        scheme, host = host.split("://", 1)
    url = f"{scheme}://{host}:{conn.port or 8083}"
    kw: dict[str, Any] = {"url": url, "verify": _verify(_extra(extra, "verify")), "connection": _named(conn)}
    if conn.login:
        kw.update(username=conn.login, password=conn.password or "")
    for key in ("client_cert", "client_key"):
        if _extra(extra, key):
            kw[key] = _extra(extra, key)
    if (timeout := _number(conn, extra, "timeout")) is not None:
        kw["timeout_s"] = timeout
    if (deadline := _number(conn, extra, "retry_deadline")) is not None:
        kw["retry_deadline_s"] = deadline
    return ConnectSettings(**kw)


def kafka_config_from_connection(conn: Any) -> dict[str, Any]:
    """A `kafka` connection's client config: its extra (the Kafka provider's form), which must name the brokers."""
    check_type(conn, KAFKA_CONN_TYPE, "a Kafka cluster")
    config = dict(conn.extra_dejson)
    if "bootstrap.servers" not in config:
        close = [k for k in config if closest(k, ["bootstrap.servers"])]
        raise ConnectionInvalid(f"The {_named(conn)} has no bootstrap.servers in its extra"
                                + (f" ({quoted(close[0])} — did you mean 'bootstrap.servers'?)" if close else ""),
                                "its extra is the Kafka client config: bootstrap.servers, security.protocol, "
                                "sasl.* …")
    return config


@dataclass(frozen=True)
class FileConnection:
    """One connection found outside Airflow's tasks, with the attributes of Airflow's `Connection` that we read,
    and where it was found (`origin`, for messages: never a value)."""

    conn_id: str
    conn_type: str | None = None
    host: str | None = None
    port: int | None = None
    schema: str | None = None
    login: str | None = None
    password: str | None = field(default=None, repr=False)
    extra_dejson: dict[str, Any] = field(default_factory=dict, repr=False)
    origin: str = ""


# -- Airflow's two forms of a connection (AIRFLOW_CONN_<ID>, a secrets backend's value) ----------------------

def normalize_conn_type(conn_type: str) -> str:
    """Airflow's `Connection._normalize_conn_type`: `postgresql` is `postgres`, dashes are underscores."""
    if conn_type == "postgresql":
        return "postgres"
    return conn_type.replace("-", "_") if "-" in conn_type else conn_type


def _extra_object(conn_id: str, extra: str | None, where: str) -> dict[str, Any]:
    """The extra as Airflow stores it (text) read as the JSON object it must be."""
    if not extra:
        return {}
    try:
        value = json.loads(extra)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise ConnectionInvalid(f"{where}: the connection's extra is not a JSON object",
                                "write the extra as a JSON object, e.g. {\"bootstrap.servers\": \"host:9092\"}")
    return value


def from_fields(conn_id: str, origin: str, *, conn_type: str | None = None, host: str | None = None,
                port: int | None = None, schema: str | None = None, login: str | None = None,
                password: str | None = None, extra: str | None = None, where: str | None = None) -> FileConnection:
    """A connection from Airflow's fields as its `Connection` holds them (`extra` as text)."""
    return FileConnection(conn_id=conn_id, conn_type=conn_type, host=host, port=port, schema=schema, login=login,
                          password=password, extra_dejson=_extra_object(conn_id, extra, where or origin),
                          origin=origin)


def from_json(conn_id: str, text: str, origin: str) -> FileConnection:
    """Airflow's JSON form (`Connection.from_json`): an object of the connection's fields; `extra` an object or
    JSON text, `port` a number or text of one, `conn_type` normalized."""
    where = f"{origin} (JSON form)"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:  # its position and reason, never the text (it holds the password)
        raise ConnectionInvalid(f"{where} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
    except ValueError:
        raise ConnectionInvalid(f"{where} is not valid JSON")
    if not isinstance(data, dict):
        raise ConnectionInvalid(f"{where} is not a JSON object of the connection's fields")
    unknown = unknown_keys(list(data), FIELDS, "field")
    if unknown:
        raise ConnectionInvalid(f"{where}: {unknown}", f"the fields are: {', '.join(FIELDS)}")
    for name in ("conn_type", "description", "host", "schema", "login", "password"):
        if data.get(name) is not None and not isinstance(data[name], str):
            raise ConnectionInvalid(f"{where}: the field {quoted(name)} is not text")
    extra = data.get("extra")
    if extra and not isinstance(extra, str):
        extra = json.dumps(extra)
    port = data.get("port")
    if port:  # Airflow: int(port) of anything truthy (0.5 and "0" are port 0), no port otherwise
        if isinstance(port, bool) or not isinstance(port, (int, float, str)):
            raise ConnectionInvalid(f"{where}: the field 'port' is not a number")
        try:
            port = int(port)
        except ValueError:
            raise ConnectionInvalid(f"{where}: the field 'port' is not a number") from None
    else:
        port = None
    conn_type = data.get("conn_type")
    return from_fields(conn_id, origin, conn_type=normalize_conn_type(conn_type) if conn_type else None,
                       host=data.get("host"), port=port, schema=data.get("schema"), login=data.get("login"),
                       password=data.get("password"), extra=extra, where=where)


def _hostname(parts: Any) -> str:
    """Airflow's `_parse_netloc_to_hostname`: urlsplit's hostname, unless it holds a path."""
    hostname = unquote(parts.hostname or "")
    if "/" in hostname:
        hostname = parts.netloc
        if "@" in hostname:
            hostname = hostname.rsplit("@", 1)[1]
        if ":" in hostname:
            hostname = hostname.split(":", 1)[0]
        hostname = unquote(hostname)
    return hostname


ENCODE_HINT = ("percent-encode the special characters of each part (a password's '/', '@', ':', '?', '#' and "
               "'%': urllib.parse.quote(part, safe='')), or use the JSON form")


def from_uri(conn_id: str, uri: str, origin: str) -> FileConnection:
    """Airflow's URI form, as the Task SDK's `Connection.from_uri` reads it, step for step (the conn type from the
    scheme, a second `proto://` kept in the host, the path as the schema, query values as text or `__extra__`)."""
    where = f"{origin} (URI form)"
    schemes = uri.count("://")
    if schemes > 2:
        raise ConnectionInvalid(f"{where} has more than two '://'", ENCODE_HINT)
    with_protocol = schemes == 2
    try:
        conn_type = urlsplit(uri).scheme
        rest = uri.replace(f"{conn_type}://", "" if with_protocol else "//")
        if with_protocol:
            first = rest.split("://", 1)[0]
            if "@" in first or ":" in first:
                raise ConnectionInvalid(f"{where}: the protocol of its host holds '@' or ':'", ENCODE_HINT)
        parts = urlsplit(rest)
        port = parts.port
    except ValueError:  # urllib's words would quote the port (or what a bad split took for it): a password's part
        raise ConnectionInvalid(f"{where}: its host or port cannot be read (a port must be a number from 0 to "
                                "65535)", ENCODE_HINT) from None
    host = _hostname(parts)
    if host and with_protocol:
        host = f"{parts.scheme}://{host}"
    schema = unquote(parts.path[1:]) if parts.path[1:] else parts.path[1:]
    login = unquote(parts.username) if parts.username else parts.username
    password = unquote(parts.password) if parts.password else parts.password
    extra = None
    if parts.query:
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        extra = query[EXTRA_KEY] if EXTRA_KEY in query else json.dumps(query)
    return from_fields(conn_id, origin, conn_type=normalize_conn_type(conn_type), host=host, port=port,
                       schema=schema, login=login, password=password, extra=extra, where=where)


def from_value(conn_id: str, value: str, origin: str) -> FileConnection:
    """A connection from Airflow's serialized form (an `AIRFLOW_CONN_<ID>` value): JSON if it starts with `{`
    (after Airflow's strip), else a URI."""
    text = value.strip()
    if not text:
        raise ConnectionInvalid(f"{origin} is set but blank", "unset it, or give the connection as JSON or a URI")
    return from_json(conn_id, text, origin) if text[0] == "{" else from_uri(conn_id, text, origin)


# -- where connections are found -----------------------------------------------------------------------------

class ConnectionSource(Protocol):
    """One place a connection id may be defined."""

    def get(self, conn_id: str) -> FileConnection | None:
        """The connection, None when this source does not define it; ConnectionInvalid when it is unusable."""

    def where(self, conn_id: str) -> str:
        """Where this source looked for `conn_id` (and, once looked, what it found), for messages."""


def env_var(conn_id: str) -> str:
    return ENV_PREFIX + conn_id.upper()


class EnvSource:
    """`AIRFLOW_CONN_<ID>` variables (Airflow's EnvironmentVariablesBackend, without its multi-team names)."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self.environ = os.environ if environ is None else environ

    def get(self, conn_id: str) -> FileConnection | None:
        value = self.environ.get(env_var(conn_id))
        if value is None or value == "":  # Airflow: an empty variable defines nothing
            return None
        return from_value(conn_id, value, f"${env_var(conn_id)}")

    def where(self, conn_id: str) -> str:
        return f"${env_var(conn_id)}"


class FileSource:
    """A connections file (Airflow's import form), read when first asked."""

    def __init__(self, path: str | Path, required: bool = False) -> None:
        self.path = Path(path)
        self.required = required  # named explicitly ($MIRRORBOOK_CONNECTIONS): it must exist
        self._loaded: dict[str, FileConnection] | None = None

    def connections(self) -> dict[str, FileConnection]:
        if self._loaded is None:
            self._loaded = load_connections(self.path) if self.required or self.path.is_file() else {}
        return self._loaded

    def get(self, conn_id: str) -> FileConnection | None:
        return self.connections().get(conn_id)

    def where(self, conn_id: str) -> str:
        return f"the connections file {self.path}" + ("" if self.required or self.path.is_file() else " (absent)")


class MappingSource:
    """Connections already at hand (a test's, or a caller's that read them itself)."""

    def __init__(self, connections: Mapping[str, Any], label: str = "the connections given") -> None:
        self.connections, self.label = dict(connections), label

    def get(self, conn_id: str) -> Any | None:
        return self.connections.get(conn_id)

    def where(self, conn_id: str) -> str:
        return self.label


class Lookup:
    """Sources asked in order; the first that defines an id wins."""

    def __init__(self, sources: Sequence[ConnectionSource]) -> None:
        self.sources = list(sources)

    def get(self, conn_id: str) -> Any | None:
        for source in self.sources:
            found = source.get(conn_id)
            if found is not None:
                return found
        return None

    def searched(self, conn_id: str) -> str:
        """Every place asked, in order — what a "not found" message says."""
        return ", then ".join(s.where(conn_id) for s in self.sources) or "nowhere (no source of connections)"


def load_connections(path: str | Path) -> dict[str, FileConnection]:
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise MirrorbookError(f"Connections file {p} does not exist", f"set {ENV} to an existing file")
    except ValueError as exc:
        raise MirrorbookError(f"Connections file {p} is not valid JSON: {exc.__class__.__name__}")
    return connections_of(data, f"Connections file {p}")


def connections_of(data: Any, what: str, origin: str | None = None) -> dict[str, FileConnection]:
    """Connections in Airflow's import form (`{conn_id: {fields}}`), `what` naming where they come from in a
    refusal (a sentence's start), `origin` in each connection (default: `what`, as said mid-sentence)."""
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise MirrorbookError(f"{what} must map connection ids to objects (Airflow's import form)")
    out = {}
    for conn_id, spec in data.items():
        extra = spec.get("extra") or {}
        if isinstance(extra, str):
            try:
                extra = json.loads(extra or "{}")
            except ValueError:
                extra = None
        if not isinstance(extra, dict):
            raise MirrorbookError(f"{what}: connection {cut(conn_id)!r} has an extra that is not a JSON object")
        port = spec.get("port")
        out[conn_id] = FileConnection(conn_id=conn_id, conn_type=str(spec.get("conn_type", "")),
                                      host=spec.get("host"), port=port, schema=spec.get("schema"),
                                      login=spec.get("login"), password=spec.get("password"), extra_dejson=extra,
                                      origin=origin or f"{what[:1].lower()}{what[1:]}")
    return out


def file_source(topology_path: str | Path | None) -> FileSource:
    """`$MIRRORBOOK_CONNECTIONS` (which must exist), else `airflow-connections.json` beside the topology file."""
    configured = settings.CONNECTIONS.get()
    if configured:
        return FileSource(configured, required=True)
    from mirrorbook.topology import default_path

    return FileSource(Path(topology_path or default_path()).parent / FILE_NAME)


def connections_for(topology_path: str | Path | None) -> dict[str, FileConnection]:
    """The connections file's connections (see `file_source`), or none when there is no file."""
    return file_source(topology_path).connections()


def airflow_source() -> ConnectionSource | None:
    """Airflow's own lookup, where Airflow is installed and configured (`mirrorbook.airflow.lookup`); else None.
    Only that module imports Airflow, and only when a connection is asked of it."""
    import importlib.util

    if importlib.util.find_spec("airflow") is None:
        return None
    from importlib import import_module

    lookup = import_module("mirrorbook.airflow.lookup")
    return lookup.AirflowSource() if lookup.configured() else None


def cli_lookup(topology_path: str | Path | None, environ: Mapping[str, str] | None = None,
               airflow: Callable[[], ConnectionSource | None] = airflow_source) -> Lookup:
    """What the CLI resolves a topology's connection ids through, in this order: `AIRFLOW_CONN_<ID>`, Airflow's
    lookup (where installed and configured), the connections file."""
    sources: list[ConnectionSource] = [EnvSource(environ)]
    found = airflow()
    if found is not None:
        sources.append(found)
    sources.append(file_source(topology_path))
    return Lookup(sources)


# The order, as `--help` states it (a "not found" message lists the places it asked, in this order).
PRECEDENCE_HELP = ("The topology's connection ids are resolved as Airflow resolves them, first found wins: "
                   "$AIRFLOW_CONN_<ID> (JSON or URI form), then Airflow's secrets backend and metadata DB (where "
                   f"Airflow is installed and configured), then the connections file (${ENV}, else {FILE_NAME} "
                   "beside the topology); an id defined nowhere falls back to the topology's own address.")
