"""Where the CLI finds a topology's connections (`mirrorbook.connections`): AIRFLOW_CONN_<ID> read exactly as Airflow
reads it (property-tested against Airflow itself), Airflow's own lookup, the connections file — each a boundary
where any content gets either a connection or a precise refusal that never echoes a secret — in that order."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import assume, event, example, given, settings
from hypothesis import strategies as st

from mirrorbook.bounds import closest, quoted
from mirrorbook.clients import FileResolver, cli_clients
from mirrorbook.connections import (
    CONNECT_EXTRAS,
    FIELDS,
    ConnectionInvalid,
    EnvSource,
    FileConnection,
    MappingSource,
    cli_lookup,
    connections_for,
    env_var,
    from_uri,
    from_value,
    kafka_config_from_connection,
    load_connections,
    settings_from_connection,
)
from mirrorbook.errors import MirrorbookError
from mirrorbook.topology import Topology

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                    max_leaves=10)


@settings(max_examples=60, deadline=None)
@given(content=st.one_of(JSON.map(json.dumps), st.text(max_size=40),
                         st.dictionaries(st.text(max_size=5), st.fixed_dictionaries(
                             {"conn_type": st.text(max_size=5)}, optional={"extra": JSON, "port": JSON}),
                             max_size=2).map(json.dumps)))
def test_any_file_gives_connections_or_a_refusal_naming_the_file(tmp_path_factory, content):
    path = tmp_path_factory.mktemp("conns") / "airflow-connections.json"
    path.write_text(content)
    try:
        conns = load_connections(path)
    except MirrorbookError as exc:
        assert str(exc).startswith(f"Connections file {path}"), exc  # names the file first
        return
    for conn_id, conn in conns.items():
        assert conn.conn_id == conn_id and isinstance(conn.extra_dejson, dict)
        assert "password" not in repr(conn) or conn.password is None  # never shown


def test_the_file_beside_the_topology_resolves_its_ids_with_secrets_and_connection_wins(tmp_path: Path,
                                                                                         monkeypatch):
    monkeypatch.delenv("MIRRORBOOK_CONNECTIONS", raising=False)
    topo = Topology.model_validate({
        "clusters": {"A": {"connection_id": "kafka_a", "bootstrap_servers": "ignored:1"},
                     "B": {"connection_id": "kafka_b", "bootstrap_servers": "b:9092"}},
        "connect_clusters": {"B": {"connection_id": "connect_b"}},
        "flows": [{"source": "A", "target": "B", "connect_cluster": "B"}]})
    (tmp_path / "topology.yaml").write_text(topo.to_yaml())
    (tmp_path / "airflow-connections.json").write_text(json.dumps({
        "kafka_a": {"conn_type": "kafka", "extra": {"bootstrap.servers": "a:9093", "security.protocol": "SASL_SSL",
                                                    "sasl.password": "pw"}},
        "connect_b": {"conn_type": "kafka_connect", "host": "c", "port": 8443, "schema": "https", "login": "u",
                      "password": "s3", "extra": {"use_tls": True, "verify": "/ca.pem"}}}))
    resolver = FileResolver(topo, connections_for(tmp_path / "topology.yaml"))
    assert resolver.kafka_config("A")["bootstrap.servers"] == "a:9093"  # the connection wins over the address
    assert resolver.kafka_config("B") == {"bootstrap.servers": "b:9092"}  # no connection: the address
    settings_b = resolver.connect_settings("B")
    assert (settings_b.url, settings_b.username, settings_b.verify, settings_b.name) == (
        "https://c:8443", "u", "/ca.pem", "B")
    assert "s3" not in repr(settings_b) and settings_b.password.get_secret_value() == "s3"
    monkeypatch.setenv("MIRRORBOOK_CONNECTIONS", str(tmp_path / "missing.json"))
    with pytest.raises(MirrorbookError, match="missing.json does not exist"):
        connections_for(tmp_path / "topology.yaml")


def test_settings_from_a_file_connection_and_an_airflow_one_are_the_same_function():
    from mirrorbook.airflow.hooks import connect as hook

    assert hook.settings_from_connection is settings_from_connection


# -- AIRFLOW_CONN_<ID>: Airflow's two forms, read as Airflow reads them ------------------------------------------
# The reference is Airflow itself (this module imports it; mirrorbook's core does not): the Task SDK's
# `Connection(uri=…)` for the URI form, and Airflow's own lookup (`BaseHook.get_connection`, its environment
# backend) for whole variables.

FIELD_TEXT = st.text(max_size=12)
# Parts of URIs as people write them — and their special characters, percent-encoded or not.
PART = st.text(alphabet=st.sampled_from("abcXYZ019-_.~:/@?#%&=+ !$'()*,;[]é"), max_size=10)
CONN_TYPES = st.sampled_from(["kafka", "kafka-connect", "kafka_connect", "postgresql", "http", "spark", ""])


def _airflow_uri(conn_id: str, uri: str):
    from airflow.sdk import Connection

    return Connection(conn_id=conn_id, uri=uri)


def _same(ours: FileConnection, theirs) -> None:
    """Ours equals Airflow's field for field; Airflow's extra (text) is the JSON object ours holds."""
    assert (ours.conn_type, ours.host, ours.port, ours.schema, ours.login, ours.password) == (
        theirs.conn_type, theirs.host, theirs.port, theirs.schema, theirs.login, theirs.password)
    assert ours.extra_dejson == (json.loads(theirs.extra) if theirs.extra else {})


def _extra_is_an_object(extra) -> bool:
    try:
        return not extra or isinstance(json.loads(extra), dict)
    except ValueError:
        return False


@st.composite
def uris(draw) -> str:
    """A URI from parts, each percent-encoded or (sometimes) raw — what a hand-written variable holds."""
    def part(strategy=PART) -> str:
        text = draw(strategy)
        return quote(text, safe="") if draw(st.booleans()) or not text else text
    scheme = draw(CONN_TYPES)
    userinfo = draw(st.sampled_from(["", "{u}@", "{u}:{p}@", ":{p}@"])).format(u=part(), p=part())
    host = draw(st.sampled_from(["localhost", "Connect.Example.com", "10.0.0.1", "[::1]", "", "h%2Fpath"]))
    port = draw(st.sampled_from(["", ":8083", ":0", ":65535", ":99999", ":x1"]))
    proto = draw(st.sampled_from(["", "https://"]))
    schema = draw(st.sampled_from(["", "/https", "/" + part()]))
    query = draw(st.sampled_from([
        "", "?use_tls=true&verify=%2Fca.pem", "?a=&b", "?__extra__=%7B%22k%22%3A+1%7D", "?__extra__=%5B1%5D",
        "?bootstrap.servers=a%3A9093&security.protocol=SASL_SSL", "?" + part()]))
    return f"{scheme}://{proto}{userinfo}{host}{port}{schema}{query}"


@settings(max_examples=400, deadline=None)
@given(uri=st.one_of(uris(), st.text(max_size=40)))
def test_the_uri_form_reads_as_airflows_connection_uri(uri):
    """Wherever Airflow's `Connection(uri=…)` gives a usable connection, ours is the same, field for field;
    where Airflow refuses the URI, ours refuses it too, precisely; ours refuses beyond Airflow only an extra that is
    not a JSON object (Airflow would drop it silently, and the connection would mean something else)."""
    try:
        theirs = _airflow_uri("c", uri)
    except Exception:  # noqa: BLE001 — Airflow's AirflowException or urllib's ValueError
        theirs = None
    try:
        ours = from_uri("c", uri, "$AIRFLOW_CONN_C")
    except ConnectionInvalid as exc:
        event("refused")
        assert str(exc).startswith("$AIRFLOW_CONN_C (URI form)"), exc
        assert theirs is None or not _extra_is_an_object(theirs.extra), (uri, exc)
        return
    event("read alike")
    assert theirs is not None, uri
    _same(ours, theirs)


def _not_text(value: str) -> bool:
    """A JSON form with a field that should be text and is not (Airflow keeps it, or drops it when falsy), or a
    port that is a JSON boolean (Airflow reads `true` as port 1)."""
    try:
        data = json.loads(value)
    except ValueError:
        return False
    return isinstance(data, dict) and (isinstance(data.get("port"), bool) or any(
        data.get(k) is not None and not isinstance(data[k], str)
        for k in ("conn_type", "description", "host", "schema", "login", "password")))


def _value(conn_id: str, value: str):
    """Airflow's own lookup of a variable: the connection, or None where Airflow cannot read it (its lookup then
    logs and carries on, and says the id "isn't defined")."""
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(env_var(conn_id), value)
        try:
            return BaseHook.get_connection(conn_id)
        except AirflowNotFoundException:
            return None


FIELD_VALUES = st.one_of(st.none(), FIELD_TEXT, st.integers(-5, 70_000), st.booleans(), st.floats(0, 9e4),
                         st.lists(st.integers(), max_size=2), st.dictionaries(FIELD_TEXT, FIELD_TEXT, max_size=2))
JSON_KEYS = st.one_of(st.sampled_from(FIELDS), st.sampled_from(["hots", "login_", "Password", "extras", "conn_id"]))


@settings(max_examples=300, deadline=None)
@example(value='{"port": 0.5}')  # truthy, yet int() makes it 0: Airflow keeps port 0 (found by this test)
@example(value='{"port": "0"}')
@given(value=st.one_of(
    st.dictionaries(JSON_KEYS, FIELD_VALUES, max_size=5).map(json.dumps),
    st.fixed_dictionaries({"conn_type": CONN_TYPES, "host": FIELD_TEXT, "port": st.one_of(
        st.integers(0, 65535), st.sampled_from(["8083", "x", "", "08"])), "login": FIELD_TEXT, "password": FIELD_TEXT,
        "extra": st.one_of(st.dictionaries(FIELD_TEXT, FIELD_TEXT, max_size=2), st.just("{\"a\": 1}"),
                           st.just("not json"))}).map(json.dumps),
    uris(), st.text(max_size=30).map(lambda t: "{" + t), st.text(max_size=30)).filter(lambda v: "\x00" not in v))
def test_a_variable_reads_as_airflows_own_lookup_reads_it(value):  # (an environment variable holds no NUL)
    """AIRFLOW_CONN_<ID> as Airflow's lookup reads it, JSON form or URI form: the same connection where Airflow
    gives a usable one; where Airflow cannot read it (and would say the id "isn't defined"), a refusal naming the
    variable and the form. Ours refuses beyond Airflow only what Airflow would take and misread: a field that is not
    text, an extra that is not a JSON object, a blank variable."""
    conn_id = f"c_{uuid.uuid4().hex[:8]}"
    theirs = _value(conn_id, value)
    try:
        ours = EnvSource({env_var(conn_id): value}).get(conn_id)
    except ConnectionInvalid as exc:
        event("refused")
        assert str(exc).startswith(f"${env_var(conn_id)}"), exc
        assert theirs is None or not _extra_is_an_object(theirs.extra) or _not_text(value) or not value.strip(), \
            (value, exc)
        return
    if ours is None:  # an empty variable defines nothing, for Airflow too
        assert value == "" and theirs is None
        return
    event("read alike")
    assert theirs is not None, value
    _same(ours, theirs)


@settings(max_examples=150, deadline=None)
@given(field=st.sampled_from(FIELDS), edit=st.sampled_from(["drop", "double", "swap", "upper", "suffix"]),
       data=st.data())
def test_a_misspelled_field_is_refused_naming_it_and_the_field_it_misspells(field, edit, data):
    """A field of the JSON form, or of a kafka_connect connection's extra, misspelled: refused, naming the field
    as written and the one it most likely misspells — never silently dropped (Airflow's JSON form raises a
    TypeError its lookup swallows; an extra Airflow keeps and nothing reads)."""
    def misspell(name: str) -> str:
        i = data.draw(st.integers(0, len(name) - 1))
        return {"drop": name[:i] + name[i + 1:], "double": name[:i] + name[i] + name[i:],
                "swap": name[:i] + name[i + 1:i + 2] + name[i:i + 1] + name[i + 2:], "upper": name.upper(),
                "suffix": name + "s"}[edit]
    wrong = misspell(field)
    assume(wrong not in FIELDS)
    with pytest.raises(ConnectionInvalid) as exc:
        from_value("c", json.dumps({"conn_type": "kafka", wrong: "x"}), "$AIRFLOW_CONN_C")
    text = str(exc.value)
    assert text.startswith("$AIRFLOW_CONN_C (JSON form): unknown field ") and repr(wrong)[1:-1] in text, text
    if closest(wrong, FIELDS) == field:
        assert f"did you mean '{field}'?" in text, text
    extra = data.draw(st.sampled_from(CONNECT_EXTRAS))
    typo = misspell(extra)
    assume(typo not in CONNECT_EXTRAS)
    conn = from_value("c", json.dumps({"conn_type": "kafka_connect", "host": "h", "extra": {typo: "x"}}),
                      "$AIRFLOW_CONN_C")
    with pytest.raises(ConnectionInvalid) as exc:
        settings_from_connection(conn)
    assert str(exc.value).startswith(f"The connection 'c' ($AIRFLOW_CONN_C): unknown extra field {quoted(typo)}"), \
        exc.value


SECRET = st.text(alphabet=st.sampled_from("abcdefXYZ0123456789/@:?#%&=+-_. "), min_size=6, max_size=16).map(
    lambda t: f"S3cr{t}")


@settings(max_examples=200, deadline=None)
@given(secret=SECRET, shape=st.sampled_from(["uri-raw", "uri-port", "uri-extra", "json-field", "json-cut",
                                             "json-port", "json-extra", "json-type", "connect-extra", "kafka-extra"]))
def test_no_refusal_of_a_connection_echoes_a_secret(secret, shape):
    """A connection holding a password (or a SASL password in its extra) written wrong in any of these ways is
    refused — and the refusal names the variable, the form and the field, never the secret, raw or encoded."""
    q = quote(secret, safe="")
    value = {
        "uri-raw": f"kafka-connect://ops:{secret}@host:8443/https",  # unencoded: urllib may split inside it
        "uri-port": f"kafka-connect://ops:{q}@host:{secret[:4]}/https",
        "uri-extra": f"kafka-connect://ops:{q}@host:8443/https?__extra__={quote(secret)}",
        "json-field": json.dumps({"conn_type": "kafka_connect", "passwd": secret}),
        "json-cut": json.dumps({"conn_type": "kafka_connect", "password": secret})[:-3],
        "json-port": json.dumps({"conn_type": "kafka_connect", "password": secret, "port": secret}),
        "json-extra": json.dumps({"conn_type": "kafka", "password": secret, "extra": secret}),
        "json-type": json.dumps({"conn_type": "kafka", "password": [secret]}),
        "connect-extra": json.dumps({"conn_type": "kafka_connect", "password": secret,
                                     "extra": {"verfy": secret, "timeout": secret}}),
        "kafka-extra": json.dumps({"conn_type": "kafka", "extra": {"bootstrap.server": "h:1",
                                                                   "sasl.password": secret}}),
    }[shape]
    try:
        conn = EnvSource({"AIRFLOW_CONN_C": value}).get("c")
        settings_from_connection(conn) if conn.conn_type == "kafka_connect" else kafka_config_from_connection(conn)
    except MirrorbookError as exc:
        text = str(exc)
        assert text.startswith("$AIRFLOW_CONN_C") or "connection 'c' ($AIRFLOW_CONN_C" in text, text
        for shown_as in {secret, q, quote(secret), json.dumps(secret)[1:-1], secret[:6]}:
            assert shown_as not in text, (shape, text)
        return
    assert shape == "uri-raw", shape  # an unencoded password urllib happens to split right is no error


def test_the_cli_asks_the_environment_then_airflow_then_the_file_then_the_topology(tmp_path, monkeypatch):
    """The order, first found wins; an id defined nowhere falls back to the topology's address, and without one
    the error lists every place asked, in order. (`airflow` here is a mapping standing in for Airflow's lookup:
    the next test and tests/dags/test_hooks.py ask the real one.)"""
    monkeypatch.delenv("MIRRORBOOK_CONNECTIONS", raising=False)
    topo = Topology.model_validate({
        "clusters": {"A": {"connection_id": "k_env"}, "B": {"connection_id": "k_airflow"},
                     "C": {"connection_id": "k_file"}, "D": {"connection_id": "k_none", "bootstrap_servers": "d:1"},
                     "E": {"connection_id": "k_nowhere"}},
        "connect_clusters": {"B": {"connection_id": "c_none", "url": "http://b:8083"}},
        "flows": [{"source": "A", "target": "B", "connect_cluster": "B"}]})
    (tmp_path / "topology.yaml").write_text(topo.to_yaml())
    (tmp_path / "airflow-connections.json").write_text(json.dumps({
        "k_env": {"conn_type": "kafka", "extra": {"bootstrap.servers": "file:1"}},
        "k_airflow": {"conn_type": "kafka", "extra": {"bootstrap.servers": "file:2"}},
        "k_file": {"conn_type": "kafka", "extra": {"bootstrap.servers": "file:3"}}}))
    environ = {"AIRFLOW_CONN_K_ENV": "kafka://?bootstrap.servers=env%3A1"}
    airflow = MappingSource({"k_env": FileConnection("k_env", "kafka", extra_dejson={"bootstrap.servers": "af:1"}),
                             "k_airflow": FileConnection("k_airflow", "kafka",
                                                         extra_dejson={"bootstrap.servers": "af:2"})},
                            "Airflow (stand-in)")
    clients = cli_clients(str(tmp_path / "topology.yaml"),
                          lookup=cli_lookup(tmp_path / "topology.yaml", environ, lambda: airflow))
    assert [clients.kafka_config(a)["bootstrap.servers"] for a in "ABCD"] == ["env:1", "af:2", "file:3", "d:1"]
    assert clients.resolver.connect_settings("B").url == "http://b:8083"
    with pytest.raises(MirrorbookError) as exc:
        clients.kafka_config("E")
    assert str(exc.value).startswith(
        "Kafka cluster 'E' has no bootstrap_servers in the topology, and its connection 'k_nowhere' is defined "
        f"nowhere: looked in $AIRFLOW_CONN_K_NOWHERE, then Airflow (stand-in), then the connections file "
        f"{tmp_path / 'airflow-connections.json'}"), exc.value
    # Without Airflow (not installed, or not configured), the environment and the file alone.
    plain = cli_lookup(tmp_path / "topology.yaml", environ, lambda: None)
    assert plain.searched("x") == f"$AIRFLOW_CONN_X, then the connections file {tmp_path / 'airflow-connections.json'}"
    assert plain.get("k_airflow").extra_dejson == {"bootstrap.servers": "file:2"}


def test_airflows_own_secrets_backend_is_asked_where_airflow_is_configured(tmp_path):
    """A real Airflow secrets backend (LocalFilesystemBackend, configured as an operator would, by environment),
    in a fresh process: an id it holds resolves from it; an AIRFLOW_CONN_<ID> of the same id wins over it (the
    shell's own setting); the CLI's stdout stays Airflow's warnings-free (they go to stderr)."""
    backend = tmp_path / "secrets.json"
    backend.write_text(json.dumps({"from_backend": {
        "conn_type": "kafka_connect", "host": "backend.example", "port": 8443, "login": "ops",
        "password": "Backend-S3cret", "extra": {"use_tls": True}}, "both": {"conn_type": "kafka_connect",
                                                                             "host": "backend.example"}}))
    probe = textwrap.dedent("""
        import json
        from mirrorbook.connections import cli_lookup, settings_from_connection
        lookup = cli_lookup("topology.yaml")
        out = {}
        for conn_id in ("from_backend", "both"):
            conn = lookup.get(conn_id)
            s = settings_from_connection(conn)
            out[conn_id] = [conn.origin, s.url, s.username, s.password.get_secret_value() if s.password else None]
        print(json.dumps(out))
    """)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "HOME": str(tmp_path),
           "AIRFLOW_HOME": str(tmp_path / "airflow"),
           "AIRFLOW__SECRETS__BACKEND": "airflow.secrets.local_filesystem.LocalFilesystemBackend",
           "AIRFLOW__SECRETS__BACKEND_KWARGS": json.dumps({"connections_file_path": str(backend)}),
           "AIRFLOW_CONN_BOTH": "kafka-connect://env.example:8083"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == {
        "from_backend": ["Airflow's secrets backend", "https://backend.example:8443", "ops",
                         "Backend-S3cret"],
        "both": ["$AIRFLOW_CONN_BOTH", "http://env.example:8083", None, None]}
