"""Connect REST client over httpx, sync and async.

Every endpoint is described once as a `Call` (method, path, params, body, whether repeating it is
safe, how to parse the answer). The sync and async clients differ only in how they send and sleep.
Retry rule: a 409 (rebalance / no leader: nothing happened) is always retried; 5xx, timeouts and
connection failures only for calls that are safe to repeat. All retries stop at the policy deadline.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ConfigDict, SecretStr

from mirrorbook.connect.errors import (
    ConnectDeadlineExceeded,
    ConnectError,
    ConnectServerError,
    ConnectTimeout,
    ConnectUnreachable,
    from_response,
)
from mirrorbook.connect.models import (
    ConnectorInfo,
    ConnectorOffsets,
    ConnectorStatus,
    ConnectorView,
)
from mirrorbook.connect.retry import RetryPolicy

log = logging.getLogger(__name__)
T = TypeVar("T")


class ConnectSettings(BaseModel):
    """Where and how to reach one Connect cluster. The password never appears in repr or logs."""

    model_config = ConfigDict(frozen=True)
    url: str
    username: str | None = None
    password: SecretStr | None = None
    verify: bool | str = True  # False, True, or a CA bundle path
    client_cert: str | None = None
    client_key: str | None = None
    timeout_s: float = 30.0
    retry_deadline_s: float = 30.0

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

    @property
    def mutating(self) -> bool:
        return self.method != "GET"

    def describe(self) -> str:
        q = "&".join(f"{k}={v}" for k, v in self.params)
        return f"{self.method} {self.path}{'?' + q if q else ''}"


def _c(name: str) -> str:
    return quote(name, safe="")


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
        return Call("GET", f"/connectors/{_c(name)}/status", ConnectorStatus.model_validate)

    @staticmethod
    def info(name: str) -> Call[ConnectorInfo]:
        return Call("GET", f"/connectors/{_c(name)}", ConnectorInfo.model_validate)

    @staticmethod
    def get_config(name: str) -> Call[dict[str, str]]:
        return Call("GET", f"/connectors/{_c(name)}/config", dict)

    @staticmethod
    def put_config(name: str, config: dict[str, str]) -> Call[ConnectorInfo]:
        return Call("PUT", f"/connectors/{_c(name)}/config", ConnectorInfo.model_validate, body=config)

    @staticmethod
    def delete(name: str) -> Call[None]:
        # Repeating a DELETE that succeeded answers 404: not safe to blindly repeat on 5xx.
        return Call("DELETE", f"/connectors/{_c(name)}", _none, safe_to_repeat=False)

    @staticmethod
    def pause(name: str) -> Call[None]:
        return Call("PUT", f"/connectors/{_c(name)}/pause", _none)

    @staticmethod
    def resume(name: str) -> Call[None]:
        return Call("PUT", f"/connectors/{_c(name)}/resume", _none)

    @staticmethod
    def stop(name: str) -> Call[None]:
        return Call("PUT", f"/connectors/{_c(name)}/stop", _none)

    @staticmethod
    def restart(name: str, include_tasks: bool = False, only_failed: bool = False) -> Call[Any]:
        params = [("includeTasks", str(include_tasks).lower()), ("onlyFailed", str(only_failed).lower())]
        parse = (lambda b: ConnectorStatus.model_validate(b) if b else None)
        return Call("POST", f"/connectors/{_c(name)}/restart", parse, params, safe_to_repeat=False)

    @staticmethod
    def restart_task(name: str, task: int) -> Call[None]:
        return Call("POST", f"/connectors/{_c(name)}/tasks/{task}/restart", _none, safe_to_repeat=False)

    @staticmethod
    def get_offsets(name: str) -> Call[ConnectorOffsets]:
        return Call("GET", f"/connectors/{_c(name)}/offsets", ConnectorOffsets.model_validate)

    @staticmethod
    def alter_offsets(name: str, offsets: ConnectorOffsets) -> Call[str]:
        # Setting absolute offsets twice leaves the same state: safe to repeat.
        # A 500 here is the MM2 connector rejecting the payload: repeating cannot help (timeouts still retry).
        return Call("PATCH", f"/connectors/{_c(name)}/offsets", _message, body=offsets.to_body(),
                    retry_server_errors=False)

    @staticmethod
    def reset_offsets(name: str) -> Call[str]:
        return Call("DELETE", f"/connectors/{_c(name)}/offsets", _message)


def _message(body: Any) -> str:
    return str(body.get("message", "")) if isinstance(body, dict) else str(body or "")


def _decode(resp: httpx.Response) -> Any:
    if not resp.content:
        return None
    try:
        return resp.json()
    except ValueError:
        return resp.text


def _outcome(call: Call[T], resp: httpx.Response) -> T:
    body = _decode(resp)
    if resp.status_code >= 400:
        raise from_response(resp.status_code, body, call.method, call.path)
    return call.parse(body)


def _transport_error(call: Call[Any], exc: httpx.HTTPError) -> ConnectError:
    if isinstance(exc, httpx.TimeoutException):
        return ConnectTimeout(f"no answer within the client timeout ({type(exc).__name__})",
                              method=call.method, path=call.path)
    return ConnectUnreachable(f"cannot reach Connect: {exc}", method=call.method, path=call.path,
                              hint="check the Connect URL, that the worker is up, and TLS settings")


def _should_retry(call: Call[Any], err: ConnectError) -> bool:
    if not err.retryable:
        return False
    if type(err) is ConnectServerError and not call.retry_server_errors:
        return False
    if isinstance(err, ConnectServerError) and not call.safe_to_repeat:
        # The request may have been applied; repeating a non-idempotent call could double it.
        return isinstance(err, ConnectUnreachable) and "refused" in err.message.lower()
    return True


def _exhausted(call: Call[Any], err: ConnectError, attempts: int, policy: RetryPolicy) -> ConnectError:
    if attempts <= 1 or not err.retryable:
        return err
    out = ConnectDeadlineExceeded(
        f"gave up after {attempts} attempts within {policy.deadline_s:.0f}s; last error: {err.message}",
        status=err.status, method=call.method, path=call.path)
    out.__cause__ = err
    return out


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

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.settings.url!r})"

    def _observe(self, call: Call[Any], status: int | None) -> None:
        if self.on_call:
            self.on_call(call, status)


class _Attempts:
    """The retry state of one call: turns each answer into a result, an error, or the next delay."""

    def __init__(self, client: "_Base", call: Call[Any]) -> None:
        self.client = client
        self.call = call
        self.count = 0
        self.delays = client.retry.delays()

    def settle(self, answer: httpx.Response | httpx.HTTPError) -> tuple[bool, Any]:
        self.count += 1
        call = self.call
        if isinstance(answer, httpx.HTTPError):
            self.client._observe(call, None)
            err = _transport_error(call, answer)
        else:
            self.client._observe(call, answer.status_code)
            try:
                return True, _outcome(call, answer)
            except ConnectError as exc:
                err = exc
        delay = next(self.delays, None) if _should_retry(call, err) else None
        if delay is None:
            raise _exhausted(call, err, self.count, self.client.retry) from err
        log.info("retrying %s after %s: %s (in %.2fs)", call.describe(), type(err).__name__, err.message, delay)
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

    def run(self, call: Call[T]) -> T:
        attempt = _Attempts(self, call)
        while True:
            try:
                answer: httpx.Response | httpx.HTTPError = self._http.request(
                    call.method, call.path, params=call.params or None, json=call.body)
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

    async def run(self, call: Call[T]) -> T:
        attempt = _Attempts(self, call)
        while True:
            try:
                answer: httpx.Response | httpx.HTTPError = await self._http.request(
                    call.method, call.path, params=call.params or None, json=call.body)
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
