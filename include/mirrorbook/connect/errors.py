"""Typed Connect REST errors, mapped from the status code and Connect's `{"error_code", "message"}` body."""

from __future__ import annotations

from mirrorbook.errors import MirrorbookError

NOT_STOPPED_MARKER = "must be in the STOPPED state"


class ConnectError(MirrorbookError):
    """A failed Connect REST call. `retryable` says whether repeating it can succeed."""

    retryable = False

    def __init__(self, message: str, *, status: int | None = None, method: str = "", path: str = "",
                 hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.status = status
        self.method = method
        self.path = path

    def __str__(self) -> str:
        where = f"{self.method} {self.path}: " if self.method else ""
        code = f"[{self.status}] " if self.status else ""
        text = f"{where}{code}{self.message}"
        return f"{text}\n  fix: {self.hint}" if self.hint else text


class ConnectorNotFound(ConnectError):
    pass


class ConnectorNotStopped(ConnectError):
    """Connect's 400 for offset changes on a RUNNING or PAUSED connector."""


class ConnectBadRequest(ConnectError):
    pass


class ConnectConflict(ConnectError):
    """409: a rebalance is in progress or the leader is unknown. Nothing was done; always safe to retry."""

    retryable = True


class ConnectServerError(ConnectError):
    """5xx. Retryable only for calls that are safe to repeat (the caller decides)."""

    retryable = True


class ConnectTimeout(ConnectServerError):
    """The request timed out (client side, or Connect's own 500 "Request timed out")."""


class ConnectUnreachable(ConnectServerError):
    """No HTTP answer at all: connection refused, DNS, TLS handshake."""


class ConnectDeadlineExceeded(ConnectError):
    """Retries ran out of time; wraps the last error."""


def from_response(status: int, body: object, method: str, path: str) -> ConnectError:
    message = ""
    if isinstance(body, dict):
        message = str(body.get("message") or "")
    elif isinstance(body, str):
        message = body
    message = message or f"HTTP {status}"
    kw = dict(status=status, method=method, path=path)
    if status == 404:
        return ConnectorNotFound(message, **kw)
    if status == 400 and NOT_STOPPED_MARKER in message:
        return ConnectorNotStopped(message, **kw)
    if status == 400:
        return ConnectBadRequest(message, **kw)
    if status == 409:
        return ConnectConflict(message, **kw)
    if status == 500 and "timed out" in message.lower():
        return ConnectTimeout(message, **kw)
    if status >= 500:
        return ConnectServerError(message, **kw)
    return ConnectError(message, **kw)
