"""Connect errors name the place: the cluster (alias, URL without credentials), the call with the
connector's real name, and — when retries ran out — the deadline, the attempts and the last error.

The unreachable cases are real: a local port nothing listens on (no Connect needed, nothing mocked).
"""

from __future__ import annotations

import asyncio
import re

import pytest

from mirrorbook.connect import AsyncConnectClient, ConnectClient, ConnectSettings
from mirrorbook.connect.client import Endpoints
from mirrorbook.connect.errors import (ConnectConflict, ConnectDeadlineExceeded, ConnectorNotFound,
                                       ConnectUnreachable, Where, from_response)
from mirrorbook.connect.retry import RetryPolicy

NAME = "A->B.MirrorSourceConnector"
CLOSED = "localhost:9"  # the discard port: nothing listens on it here, so connecting is refused


def _where(cluster: str | None = "B") -> Where:
    call = Endpoints.status(NAME)
    return Where(url="http://connect-b:8083", cluster=cluster, method=call.method, path=call.path,
                 call=call.describe())


def test_the_call_names_the_connector_by_its_real_name():
    call = Endpoints.status(NAME)
    assert call.path == "/connectors/A-%3EB.MirrorSourceConnector/status"
    assert call.describe() == f"GET status of connector {NAME}"
    assert Endpoints.info(NAME).describe() == f"GET connector {NAME}"
    assert Endpoints.restart_task(NAME, 2).describe() == f"POST restart of task 2 of connector {NAME}"
    assert Endpoints.list(("status",)).describe() == "GET /connectors?expand=status"
    assert Endpoints.status("x" * 5_000).describe().endswith("… (5000 chars)")


def test_an_error_names_cluster_call_and_reason():
    err = from_response(404, {"error_code": 404, "message": f"No status found for connector {NAME}"}, _where())
    assert isinstance(err, ConnectorNotFound)
    assert str(err) == (f"Connect cluster B (http://connect-b:8083): GET status of connector {NAME}: "
                        f"[404] No status found for connector {NAME}")
    assert err.message == f"No status found for connector {NAME}"  # the bare reason, for callers' own context
    assert err.method == "GET" and err.path.endswith("/status")
    unnamed = from_response(409, None, _where(cluster=None))
    assert str(unnamed).startswith(f"Connect cluster at http://connect-b:8083: GET status of connector {NAME}: [409]")


def test_the_deadline_error_names_deadline_attempts_last_error_and_keeps_the_fix():
    last = ConnectUnreachable("cannot reach Connect: [Errno 111] Connection refused", where=_where(),
                              hint="check the Connect URL", attempts=12)
    err = ConnectDeadlineExceeded(last, attempts=12, deadline_s=30)
    assert str(err) == (f"Connect cluster B (http://connect-b:8083): GET status of connector {NAME} gave up after "
                        "12 attempts within 30s; last error: cannot reach Connect: [Errno 111] Connection refused"
                        "\n  fix: check the Connect URL")
    assert err.last is last and err.__cause__ is last and err.hint == "check the Connect URL"
    conflict = ConnectDeadlineExceeded(ConnectConflict("rebalance in progress", status=409, where=_where()),
                                       attempts=3, deadline_s=2.5)
    assert "gave up after 3 attempts within 2.5s; last error: [409] rebalance in progress" in str(conflict)
    assert conflict.status == 409 and conflict.hint  # a fix even when the last error had none


def test_credentials_in_the_url_never_show():
    s = ConnectSettings(url="https://ops:s3cr%40t@connect-b:8083/", name="B")
    assert s.url == "https://connect-b:8083/"
    assert s.username == "ops" and s.password is not None and s.password.get_secret_value() == "s3cr@t"
    explicit = ConnectSettings(url="http://x:y@connect-b:8083", username="me", password="pw")
    assert explicit.url == "http://connect-b:8083" and explicit.username == "me"
    with ConnectClient(s) as c:
        for text in (repr(c), repr(c.settings), str(c.settings), c.place, str(c.where(Endpoints.root()))):
            assert "s3cr" not in text
        assert c.place == "Connect cluster B (https://connect-b:8083/)"


def _refused_sync(settings: ConnectSettings, policy: RetryPolicy, call) -> Exception:
    with ConnectClient(settings, retry=policy) as c:
        with pytest.raises(Exception) as err:
            c.run(call)
    return err.value


def _refused_async(settings: ConnectSettings, policy: RetryPolicy, call) -> Exception:
    async def go() -> Exception:
        async with AsyncConnectClient(settings, retry=policy) as c:
            with pytest.raises(Exception) as err:
                await c.run(call)
        return err.value
    return asyncio.run(go())


@pytest.mark.parametrize("send", [_refused_sync, _refused_async], ids=["sync", "async"])
@pytest.mark.parametrize("call", [Endpoints.status(NAME), Endpoints.restart(NAME)], ids=["GET", "POST"])
def test_a_refused_connection_is_retried_until_the_deadline_with_the_same_words(send, call):
    """Refused: the request never left, so even POST restart is retried; sync and async say the same."""
    settings = ConnectSettings(url=f"http://ops:s3cr3t@{CLOSED}", name="B")
    err = send(settings, RetryPolicy(deadline_s=1, initial_s=0.05, max_backoff_s=0.2, jitter_s=0.05), call)
    assert isinstance(err, ConnectDeadlineExceeded)
    what = call.describe()
    m = re.fullmatch(re.escape(f"Connect cluster B (http://{CLOSED}): {what} gave up after ") + r"(\d+)"
                     + re.escape(" attempts within 1s; last error: cannot reach Connect: [Errno 111] Connection "
                                 "refused\n  fix: check the Connect URL, that the worker is up, and TLS settings"),
                     str(err))
    assert m, str(err)
    assert int(m.group(1)) >= 3 and err.attempts == int(m.group(1))
    assert isinstance(err.last, ConnectUnreachable) and err.last.refused
    assert "s3cr3t" not in str(err)


@pytest.mark.parametrize("status, user, first", [
    (401, "mirrorbook", "Connect cluster B (http://connect-b:8083) refused the credentials of basic-auth user "
                        "'mirrorbook' ([401] Unauthorized — a wrong username or password), on GET status of "
                        "connector "),
    (403, "mirrorbook", "Connect cluster B (http://connect-b:8083) refused basic-auth user 'mirrorbook' ([403] "
                        "Unauthorized — the user may not make this call), on GET status of connector "),
    (401, None, "Connect cluster B (http://connect-b:8083) refused a call sent without credentials ([401] "
                "Unauthorized), on GET status of connector "),
])
def test_a_refusal_leads_with_who_refused_what_then_names_the_connection_to_fix(status, user, first):
    """Whatever shows it (a flow's state, a precheck, a task's failure), a refused call says first who refused
    what; its fix names the connection the credentials came from (its id and where it was found)."""
    where = _where()
    where = Where(**{**where.__dict__, "user": user,
                     "connection": "connection 'mirrorbook_connect_b' ($AIRFLOW_CONN_MIRRORBOOK_CONNECT_B)"})
    err = from_response(status, {"error_code": status, "message": "Unauthorized"}, where)
    head, fix = str(err).splitlines()
    assert head.startswith(first) and head == err.headline(), head
    assert fix == ("  fix: set the login/password of connection 'mirrorbook_connect_b' ($AIRFLOW_CONN_MIRRORBOOK_"
                   "CONNECT_B) to a user in the worker's basic-auth user file (Connect's PropertyFileLoginModule)")


def test_an_untrusted_worker_certificate_is_refused_by_mirrorbook_said_first(tmp_path):
    """A real TLS handshake with a server whose certificate no CA here signed: mirrorbook refused it, said first."""
    import ssl
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from mirrorbook.connect.errors import ConnectTlsError
    from mirrorbook.devstack.security import _certificates
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    _, p12 = _certificates("pw")  # signed by a throwaway CA nothing here trusts
    key, cert, _ = pkcs12.load_key_and_certificates(p12, b"pw")
    tmp = tmp_path
    (tmp / "c.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp / "k.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption()))
    server = HTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp / "c.pem", tmp / "k.pem")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        settings = ConnectSettings(url=f"https://127.0.0.1:{server.server_port}", name="B", username="mirrorbook",
                                   password="S3cret-pw", connection="connection 'c' ($AIRFLOW_CONN_C)")
        with pytest.raises(ConnectTlsError) as exc, ConnectClient(settings) as c:
            c.list()
    finally:
        server.shutdown()
    text = str(exc.value)
    assert text.startswith(f"mirrorbook refused the TLS certificate of Connect cluster B (https://127.0.0.1:"
                           f"{server.server_port}) (TLS handshake failed: the worker's certificate is not trusted by "
                           "the system's CA certificates), on GET "), text
    assert text.endswith("fix: set `verify` in connection 'c' ($AIRFLOW_CONN_C) to the CA file that signed the "
                         "worker's certificate") and "S3cret" not in text
