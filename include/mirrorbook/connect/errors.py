"""Typed Connect REST errors, mapped from the status code and Connect's `{"error_code", "message"}` body.

Every error carries its `Where`: the Connect cluster (alias and URL, never credentials) and the call in
words, with the connector's real name, so `str(error)` says where it happened without its caller's help.
`message` stays the bare reason (Connect's own words), for callers that add their own context.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

from mirrorbook.bounds import cut
from mirrorbook.redaction import redact_text
from mirrorbook.errors import MirrorbookError, Refused

NOT_STOPPED_MARKER = "must be in the STOPPED state"
MESSAGE_LIMIT = 1_000  # Connect's messages are short; a proxy's HTML error page is not


def seconds(value: float) -> str:
    """A duration as people read it: 2s for 1.99999 (a deadline's remainder), 1800s, 0.25s."""
    return f"{value:.0f}s" if value >= 100 else f"{value:.3g}s"


@dataclass(frozen=True)
class Where:
    """The place of one Connect call: the cluster (`cluster` alias, `url` without userinfo) and the call."""

    url: str = ""
    cluster: str | None = None
    method: str = ""
    path: str = ""
    call: str = ""  # the call in words: "GET status of connector A->B.MirrorSourceConnector"
    user: str | None = None  # the basic-auth user the call was sent as (never its password)
    connection: str | None = None  # the connection the client's settings came from (id and where it was found)

    @property
    def connection_label(self) -> str:
        """The connection a fix is made in: named when known."""
        return cut(self.connection) if self.connection else "this Connect cluster's connection"

    @property
    def cluster_label(self) -> str:
        url = cut(self.url)
        return f"Connect cluster {cut(self.cluster)} ({url})" if self.cluster else f"Connect cluster at {url}"

    def __str__(self) -> str:
        return f"{self.cluster_label}: {self.call or f'{self.method} {self.path}'.strip()}"


class ConnectError(MirrorbookError):
    """A failed Connect REST call. `retryable` says whether repeating it can succeed."""

    retryable = False
    _after_place = ": "

    def __init__(self, message: str, *, status: int | None = None, where: Where | None = None,
                 hint: str | None = None, attempts: int = 1) -> None:
        super().__init__(message, hint)
        self.status = status
        self.where = where or Where()
        self.attempts = attempts

    @property
    def method(self) -> str:
        return self.where.method

    @property
    def path(self) -> str:
        return self.where.path

    def reason(self) -> str:
        """The error without its place: `[409] rebalance in progress`."""
        return f"[{self.status}] {self.message}" if self.status else self.message

    def detail(self) -> str:
        """What went wrong, as said after the place."""
        return self.reason() + (f" (after {self.attempts} attempts)" if self.attempts > 1 else "")

    def headline(self) -> str:
        """The error in one line, without its fix: the place, then what went wrong there."""
        return f"{self.where}{self._after_place}{self.detail()}"

    def __str__(self) -> str:
        return self.told(self.headline())


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
    """No HTTP answer at all: connection refused, DNS, TLS handshake. `refused`: the worker's host
    refused the connection, so the request never left and even a non-idempotent call may be sent again."""

    def __init__(self, message: str, *, refused: bool = False, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.refused = refused


class ConnectRefusal(ConnectError, Refused):
    """Connect, or mirrorbook on its behalf, refused the call before anything happened: said refusal first — who
    refused what (`refused`), then Connect's own words, then the call it was — so that whatever shows this error
    (a task's failure, a flow's state, a precheck) leads with the cause. Repeating the call cannot help."""

    def refused(self) -> str:
        raise NotImplementedError

    def why(self) -> str:
        """What the refusal means, after Connect's words (empty: they say it)."""
        return ""

    def headline(self) -> str:
        return (f"{self.refused()} ({self.reason()}{self.why()}), on "
                f"{self.where.call or f'{self.method} {self.path}'.strip()}")


class ConnectAuthRefused(ConnectRefusal):
    """401/403: the worker's REST authentication (e.g. BasicAuthSecurityRestExtension) refused the call.
    Nothing was changed, and repeating the call cannot help."""

    def refused(self) -> str:
        label, user = self.where.cluster_label, self.where.user
        if user is None:
            return f"{label} refused a call sent without credentials"
        if self.status == 403:
            return f"{label} refused basic-auth user {user!r}"
        return f"{label} refused the credentials of basic-auth user {user!r}"

    def why(self) -> str:
        if self.status == 403:
            return " — the user may not make this call"
        return " — a wrong username or password" if self.where.user is not None else ""


class ConnectTlsError(ConnectRefusal):
    """The TLS handshake failed (an untrusted certificate), or plain HTTP reached an HTTPS-only worker:
    nothing was sent that could change anything, and repeating the call cannot help. `untrusted`: mirrorbook
    refused the worker's certificate (else the worker refused the plain-HTTP call)."""

    def __init__(self, message: str, *, untrusted: bool = True, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.untrusted = untrusted

    def refused(self) -> str:
        if self.untrusted:
            return f"mirrorbook refused the TLS certificate of {self.where.cluster_label}"
        return f"{self.where.cluster_label} refused a plain-HTTP call"


class ConnectDeadlineExceeded(ConnectError):
    """The call's deadline passed before it succeeded; names the deadline, the attempts and the last error
    (`last`, also the `__cause__`), and keeps the last error's status and fix."""

    _after_place = " "

    def __init__(self, last: ConnectError, *, attempts: int, deadline_s: float) -> None:
        super().__init__(f"gave up after {attempts} attempt{'s' if attempts != 1 else ''} within "
                         f"{seconds(deadline_s)}; last error: {last.reason()}",
                         status=last.status, where=last.where, attempts=attempts,
                         hint=last.hint or "check the worker (`GET /` and its log), or give the call a longer "
                                           "deadline (the Connect connection's `retry_deadline`)")
        self.last = last
        self.deadline_s = deadline_s
        self.__cause__ = last

    def detail(self) -> str:
        return self.message  # already names the attempts and the last error's status


class _Answered(TypedDict):
    """What every error made from a response carries."""

    status: int
    where: Where


def from_response(status: int, body: object, where: Where) -> ConnectError:
    message = ""
    if isinstance(body, dict):
        message = str(body.get("message") or "")
    elif isinstance(body, str):
        message = body
    # Connect echoes configs in its errors (a rejected connector config, a JAAS line): scrubbed before the
    # message reaches a log line, an exception or the audit trail.
    message = cut(redact_text(message), MESSAGE_LIMIT) or f"HTTP {status}"
    kw: _Answered = {"status": status, "where": where}
    if status in (401, 403):  # its headline says who was refused, and why (ConnectAuthRefused)
        return ConnectAuthRefused(
            message,
            hint=f"set the login/password of {where.connection_label} to a user in the worker's "
                 "basic-auth user file (Connect's PropertyFileLoginModule)", **kw)
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
