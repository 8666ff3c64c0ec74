"""Connect REST client over httpx, sync and async.

Every endpoint is described once as a `Call` (method, path, params, body, whether repeating it is
safe, how to parse the answer). The sync and async clients differ only in how they send and sleep;
`_Attempts` is the one retry machine they share.
Retry rule: a 409 (rebalance / no leader: nothing happened) is always retried; 5xx, timeouts and
connection failures only for calls that are safe to repeat (a refused connection never reached Connect,
so it is retried for any call). The policy's deadline bounds the whole call from its first request:
each attempt's timeout is capped by what is left of it (`mirrorbook.connect.retry`).
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Generic, TypeVar
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import httpx
from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from mirrorbook.bounds import cut
from mirrorbook.connect.errors import (
    ConnectDeadlineExceeded,
    ConnectError,
    ConnectServerError,
    ConnectTimeout,
    ConnectTlsError,
    ConnectUnreachable,
    Where,
    from_response,
)
from mirrorbook.connect.models import (
    ConnectorInfo,
    ConnectorOffsets,
    ConnectorStatus,
    ConnectorView,
)
from mirrorbook.connect.retry import RetryPolicy
from mirrorbook.redaction import get_logger

log = get_logger(__name__)
T = TypeVar("T")


class ConnectSettings(BaseModel):
    """Where and how to reach one Connect cluster. The password never appears in repr or logs."""

    model_config = ConfigDict(frozen=True)
    url: str
    name: str | None = None  # the cluster's alias (the topology's), named in every error when known
    # The connection these settings were read from, as fixes name it: "connection 'x' ($AIRFLOW_CONN_X)".
    connection: str | None = None
    username: str | None = None
    password: SecretStr | None = None
    verify: bool | str = True  # False, True, or a CA bundle path
    client_cert: str | None = None
    client_key: str | None = None
    timeout_s: float = Field(30.0, gt=0)  # one attempt's, and never more than what is left of the deadline
    retry_deadline_s: float = Field(30.0, gt=0)  # the whole call's, retries included

    @model_validator(mode="before")
    @classmethod
    def _credentials_out_of_url(cls, data: Any) -> Any:
        """`http://user:pw@host` becomes `http://host` plus username/password, so that the URL can be
        shown in any message; a username given explicitly wins over the URL's."""
        if not isinstance(data, dict) or not isinstance(data.get("url"), str):
            return data
        parts = urlsplit(data["url"])
        if "@" not in parts.netloc:
            return data
        userinfo, host = parts.netloc.rsplit("@", 1)
        data = {**data, "url": urlunsplit(parts._replace(netloc=host))}
        if data.get("username") is None:
            user, _, password = userinfo.partition(":")
            data.update(username=unquote(user), password=unquote(password))
        return data

    @property
    def place(self) -> str:
        """`Connect cluster B (http://host:8083)`: how messages name this cluster (never its credentials)."""
        return Where(url=self.url, cluster=self.name).cluster_label

    def httpx_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"base_url": self.url.rstrip("/"), "timeout": self.timeout_s, "verify": self.verify}
        if self.username is not None:
            kw["auth"] = httpx.BasicAuth(self.username, self.password.get_secret_value() if self.password else "")
        if self.client_cert:
            kw["cert"] = (self.client_cert, self.client_key) if self.client_key else self.client_cert
        return kw


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    parse: Callable[[Any], T]
    params: list[tuple[str, str]] = field(default_factory=list)
    body: Any = None
    safe_to_repeat: bool = True
    # False where a plain 500 is a deterministic rejection (the connector validated the body).
    retry_server_errors: bool = True
    # The connector the call is about, by its real name (the path holds it URL-encoded), and what of it.
    connector: str | None = None
    what: str = ""

    @property
    def mutating(self) -> bool:
        return self.method != "GET"

    def describe(self) -> str:
        """The call in words: `GET status of connector A->B.MirrorSourceConnector`."""
        if self.connector is not None:
            return f"{self.method} {self.what + ' of ' if self.what else ''}connector {cut(self.connector)}"
        q = "&".join(f"{k}={v}" for k, v in self.params)
        return f"{self.method} {self.path}{'?' + q if q else ''}"


def _on(method: str, name: str, tail: str, parse: Callable[[Any], T], what: str = "", **kw: Any) -> Call[T]:
    """A call on one connector: its name URL-encoded in the path, and kept as it is for messages."""
    return Call(method, f"/connectors/{quote(name, safe='')}{tail}", parse, connector=name, what=what, **kw)


def _none(_: Any) -> None:
    return None


def _raw(body: Any) -> Any:
    return body


class Endpoints:
    """Every Connect REST call mirrorbook makes, described once."""

    @staticmethod
    def root() -> Call[dict]:
        return Call("GET", "/", _raw)

    @staticmethod
    def list(expand: tuple[str, ...] = ()) -> Call[Any]:
        params = [("expand", e) for e in expand]
        if expand:
            return Call("GET", "/connectors", lambda b: {k: ConnectorView.model_validate(v) for k, v in b.items()},
                        params)
        return Call("GET", "/connectors", list, params)

    @staticmethod
    def status(name: str) -> Call[ConnectorStatus]:
        return _on("GET", name, "/status", ConnectorStatus.model_validate, "status")

    @staticmethod
    def info(name: str) -> Call[ConnectorInfo]:
        return _on("GET", name, "", ConnectorInfo.model_validate)

    @staticmethod
    def get_config(name: str) -> Call[dict[str, str]]:
        return _on("GET", name, "/config", dict, "config")

    @staticmethod
    def put_config(name: str, config: dict[str, str]) -> Call[ConnectorInfo]:
        return _on("PUT", name, "/config", ConnectorInfo.model_validate, "config", body=config)

    @staticmethod
    def delete(name: str) -> Call[None]:
        # Repeating a DELETE that succeeded answers 404: not safe to blindly repeat on 5xx.
        return _on("DELETE", name, "", _none, safe_to_repeat=False)

    @staticmethod
    def pause(name: str) -> Call[None]:
        return _on("PUT", name, "/pause", _none, "pause")

    @staticmethod
    def resume(name: str) -> Call[None]:
        return _on("PUT", name, "/resume", _none, "resume")

    @staticmethod
    def stop(name: str) -> Call[None]:
        return _on("PUT", name, "/stop", _none, "stop")

    @staticmethod
    def restart(name: str, include_tasks: bool = False, only_failed: bool = False) -> Call[Any]:
        params = [("includeTasks", str(include_tasks).lower()), ("onlyFailed", str(only_failed).lower())]
        parse = (lambda b: ConnectorStatus.model_validate(b) if b else None)
        return _on("POST", name, "/restart", parse, "restart", params=params, safe_to_repeat=False)

    @staticmethod
    def restart_task(name: str, task: int) -> Call[None]:
        return _on("POST", name, f"/tasks/{task}/restart", _none, f"restart of task {task}", safe_to_repeat=False)

    @staticmethod
    def get_offsets(name: str) -> Call[ConnectorOffsets]:
        return _on("GET", name, "/offsets", ConnectorOffsets.model_validate, "offsets")

    @staticmethod
    def alter_offsets(name: str, offsets: ConnectorOffsets) -> Call[str]:
        # Setting absolute offsets twice leaves the same state: safe to repeat.
        # A 500 here is the MM2 connector rejecting the payload: repeating cannot help (timeouts still retry).
        return _on("PATCH", name, "/offsets", _message, "offsets", body=offsets.to_body(), retry_server_errors=False)

    @staticmethod
    def reset_offsets(name: str) -> Call[str]:
        return _on("DELETE", name, "/offsets", _message, "offsets")


def _message(body: Any) -> str:
    return str(body.get("message", "")) if isinstance(body, dict) else str(body or "")


def _decode(resp: httpx.Response) -> Any:
    if not resp.content:
        return None
    try:
        return resp.json()
    except ValueError:
        return resp.text


def _outcome(call: Call[T], resp: httpx.Response, where: Where) -> T:
    body = _decode(resp)
    if resp.status_code >= 400:
        raise from_response(resp.status_code, body, where)
    return call.parse(body)


def _refusal(exc: BaseException) -> ConnectionRefusedError | None:
    """The ConnectionRefusedError behind a failed connect, if every address refused. The sync transport
    raises it as the cause; the async one chains it under "All connection attempts failed", in an
    exception group when the host has several addresses."""
    todo: list[BaseException] = [exc]
    seen: set[int] = set()
    while todo:
        err = todo.pop()
        if id(err) in seen:
            continue
        seen.add(id(err))
        if isinstance(err, ConnectionRefusedError):
            return err
        group = getattr(err, "exceptions", None)
        if isinstance(group, (list, tuple)):
            each = [_refusal(e) for e in group]
            return each[0] if each and all(each) else None
        todo.extend(e for e in (err.__cause__, err.__context__) if e is not None)
    return None


def _transport_error(exc: httpx.HTTPError, timeout_s: float, where: Where, verify: bool | str = True
                     ) -> ConnectError:
    if isinstance(exc, httpx.TimeoutException):
        return ConnectTimeout(f"no answer within {timeout_s:.3g}s ({type(exc).__name__})", where=where)
    text = str(exc)
    if "CERTIFICATE_VERIFY_FAILED" in text or "certificate verify failed" in text:
        trust = f"the CA file in `verify` ({verify})" if isinstance(verify, str) else "the system's CA certificates"
        return ConnectTlsError(f"TLS handshake failed: the worker's certificate is not trusted by {trust}", where=where,
                               hint=f"set `verify` in {where.connection_label} to the CA file that signed "
                                    "the worker's certificate")
    if where.url.startswith("http://") and ("illegal request line" in text.lower() or "WRONG_VERSION" in text):
        return ConnectTlsError("the worker answers only HTTPS on this port, and the call was sent as plain HTTP",
                               untrusted=False, where=where,
                               hint=f"set use_tls=true (schema https) in {where.connection_label}, and `verify` to its "
                                    "CA file")
    refused = _refusal(exc) if isinstance(exc, httpx.ConnectError) else None
    # The same words from both transports (the async one says "Connect call failed ('127.0.0.1', 9)").
    reason = f"[Errno {refused.errno}] {os.strerror(refused.errno)}" if refused and refused.errno else str(exc)
    return ConnectUnreachable(f"cannot reach Connect: {reason or type(exc).__name__}", where=where,
                              refused=refused is not None,
                              hint="check the Connect URL, that the worker is up, and TLS settings")


def _should_retry(call: Call[Any], err: ConnectError) -> bool:
    if not err.retryable:
        return False
    if type(err) is ConnectServerError and not call.retry_server_errors:
        return False
    if isinstance(err, ConnectServerError) and not call.safe_to_repeat:
        # The request may have been applied; repeating a non-idempotent call could double it.
        return isinstance(err, ConnectUnreachable) and err.refused
    return True



class _Base:
    def __init__(self, settings: ConnectSettings | str, retry: RetryPolicy | None = None,
                 on_call: Callable[[Call[Any], int | None], None] | None = None) -> None:
        self.settings = settings if isinstance(settings, ConnectSettings) else ConnectSettings(url=settings)
        self.retry = retry or RetryPolicy(deadline_s=self.settings.retry_deadline_s)
        # Observer for audit/metrics: called with (call, status) after each attempt.
        self.on_call = on_call

    @property
    def url(self) -> str:
        return self.settings.url

    @property
    def place(self) -> str:
        return self.settings.place

    def where(self, call: Call[Any]) -> Where:
        return Where(url=self.settings.url, cluster=self.settings.name, method=call.method, path=call.path,
                     call=call.describe(), user=self.settings.username, connection=self.settings.connection)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.settings.url!r})"

    def _observe(self, call: Call[Any], status: int | None) -> None:
        if self.on_call:
            self.on_call(call, status)


class _Attempts:
    """The retry state of one call, shared by both clients: the arguments of each attempt (its timeout
    capped by what is left of the deadline), and what each answer means: a result, an error to raise, or
    the sleep before the next attempt. Its clock starts here, before the first request."""

    def __init__(self, client: "_Base", call: Call[Any], deadline_s: float | None = None) -> None:
        self.client = client
        self.call = call
        self.where = client.where(call)
        self.policy = client.retry if deadline_s is None else replace(client.retry, deadline_s=deadline_s)
        self.schedule = self.policy.schedule()
        self.count = 0
        self.timeout_s = client.settings.timeout_s

    def request(self) -> dict[str, Any]:
        """The next attempt, as keyword arguments of `httpx.Client.request` and `AsyncClient.request`."""
        # httpx applies the timeout to each phase (connect, write, every read): a Connect answer, small
        # and sent in one piece, is bounded by it; a peer trickling bytes could outlast it.
        self.timeout_s = self.schedule.timeout(self.client.settings.timeout_s)
        call = self.call
        return {"method": call.method, "url": call.path, "params": call.params or None, "json": call.body,
                "timeout": self.timeout_s}

    def settle(self, answer: httpx.Response | httpx.HTTPError) -> tuple[bool, Any]:
        self.count += 1
        call = self.call
        if isinstance(answer, httpx.HTTPError):
            self.client._observe(call, None)
            err = _transport_error(answer, self.timeout_s, self.where, self.client.settings.verify)
        else:
            self.client._observe(call, answer.status_code)
            try:
                return True, _outcome(call, answer, self.where)
            except ConnectError as exc:
                err = exc
        err.attempts = self.count
        if not _should_retry(call, err):
            if err.retryable and not call.safe_to_repeat and err.hint is None:
                err.hint = ("Connect may have applied it before failing: check the connector's status "
                            "before repeating it")
            raise err
        delay = self.schedule.failed(err)
        if delay is None:
            if self.schedule.out_of_time:
                raise ConnectDeadlineExceeded(err, attempts=self.count, deadline_s=self.policy.deadline_s)
            raise err
        log.info("retrying %s after attempt %d: %s (in %.2fs, %.1fs left)", self.where, self.count, err.reason(),
                 delay, self.schedule.remaining())
        return False, delay


class ConnectClient(_Base):
    """Synchronous client. Use as a context manager, or call `close()`."""

    def __init__(self, settings: ConnectSettings | str, retry: RetryPolicy | None = None,
                 on_call: Callable[[Call[Any], int | None], None] | None = None) -> None:
        super().__init__(settings, retry, on_call)
        self._http = httpx.Client(**self.settings.httpx_kwargs())

    def __enter__(self) -> "ConnectClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def run(self, call: Call[T], *, deadline_s: float | None = None) -> T:
        """Send `call`, retrying within the policy's deadline (or `deadline_s`, for this call only)."""
        attempt = _Attempts(self, call, deadline_s)
        while True:
            try:
                answer: httpx.Response | httpx.HTTPError = self._http.request(**attempt.request())
            except httpx.HTTPError as exc:
                answer = exc
            done, value = attempt.settle(answer)
            if done:
                return value
            time.sleep(value)

    # -- endpoints -------------------------------------------------------------------------------
    def root(self) -> dict: return self.run(Endpoints.root())
    def list(self, expand: tuple[str, ...] = ()) -> Any: return self.run(Endpoints.list(expand))
    def status(self, name: str) -> ConnectorStatus: return self.run(Endpoints.status(name))
    def info(self, name: str) -> ConnectorInfo: return self.run(Endpoints.info(name))
    def get_config(self, name: str) -> dict[str, str]: return self.run(Endpoints.get_config(name))
    def put_config(self, name: str, config: dict[str, str]) -> ConnectorInfo:
        return self.run(Endpoints.put_config(name, config))
    def delete(self, name: str) -> None: return self.run(Endpoints.delete(name))
    def pause(self, name: str) -> None: return self.run(Endpoints.pause(name))
    def resume(self, name: str) -> None: return self.run(Endpoints.resume(name))
    def stop(self, name: str) -> None: return self.run(Endpoints.stop(name))
    def restart(self, name: str, include_tasks: bool = False, only_failed: bool = False) -> Any:
        return self.run(Endpoints.restart(name, include_tasks, only_failed))
    def restart_task(self, name: str, task: int) -> None: return self.run(Endpoints.restart_task(name, task))
    def get_offsets(self, name: str) -> ConnectorOffsets: return self.run(Endpoints.get_offsets(name))
    def alter_offsets(self, name: str, offsets: ConnectorOffsets) -> str:
        return self.run(Endpoints.alter_offsets(name, offsets))
    def reset_offsets(self, name: str) -> str: return self.run(Endpoints.reset_offsets(name))


class AsyncConnectClient(_Base):
    """Asynchronous twin of `ConnectClient` (for triggers and concurrent health checks)."""

    def __init__(self, settings: ConnectSettings | str, retry: RetryPolicy | None = None,
                 on_call: Callable[[Call[Any], int | None], None] | None = None) -> None:
        super().__init__(settings, retry, on_call)
        self._http = httpx.AsyncClient(**self.settings.httpx_kwargs())

    async def __aenter__(self) -> "AsyncConnectClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def run(self, call: Call[T], *, deadline_s: float | None = None) -> T:
        """Send `call`, retrying within the policy's deadline (or `deadline_s`, for this call only)."""
        attempt = _Attempts(self, call, deadline_s)
        while True:
            try:
                answer: httpx.Response | httpx.HTTPError = await self._http.request(**attempt.request())
            except httpx.HTTPError as exc:
                answer = exc
            done, value = attempt.settle(answer)
            if done:
                return value
            await asyncio.sleep(value)

    async def root(self) -> dict: return await self.run(Endpoints.root())
    async def list(self, expand: tuple[str, ...] = ()) -> Any: return await self.run(Endpoints.list(expand))
    async def status(self, name: str) -> ConnectorStatus: return await self.run(Endpoints.status(name))
    async def info(self, name: str) -> ConnectorInfo: return await self.run(Endpoints.info(name))
    async def get_config(self, name: str) -> dict[str, str]: return await self.run(Endpoints.get_config(name))
    async def put_config(self, name: str, config: dict[str, str]) -> ConnectorInfo:
        return await self.run(Endpoints.put_config(name, config))
    async def delete(self, name: str) -> None: return await self.run(Endpoints.delete(name))
    async def pause(self, name: str) -> None: return await self.run(Endpoints.pause(name))
    async def resume(self, name: str) -> None: return await self.run(Endpoints.resume(name))
    async def stop(self, name: str) -> None: return await self.run(Endpoints.stop(name))
    async def restart(self, name: str, include_tasks: bool = False, only_failed: bool = False) -> Any:
        return await self.run(Endpoints.restart(name, include_tasks, only_failed))
    async def restart_task(self, name: str, task: int) -> None:
        return await self.run(Endpoints.restart_task(name, task))
    async def get_offsets(self, name: str) -> ConnectorOffsets: return await self.run(Endpoints.get_offsets(name))
    async def alter_offsets(self, name: str, offsets: ConnectorOffsets) -> str:
        return await self.run(Endpoints.alter_offsets(name, offsets))
    async def reset_offsets(self, name: str) -> str: return await self.run(Endpoints.reset_offsets(name))
