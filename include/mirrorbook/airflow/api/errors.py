"""Errors of the flows API, answered the way Connect answers: `{"error_code": N, "message": "..."}`.

KIP-1144 puts the flows API on top of Connect and keeps Connect's semantics for offsets, so a
client that already handles Connect's errors handles ours. Only Airflow's own auth refusals
(401/403 from its security dependency) keep Airflow's `{"detail": ...}` shape.

Whatever a caller sends, the answer is bounded: values from the request are echoed through
`mirrorbook.bounds.shown`, and no message is longer than `MESSAGE_LIMIT`.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from mirrorbook.audit import FlowLocked
from mirrorbook.bounds import cut, shown
from mirrorbook.connect.errors import ConnectError, ConnectServerError
from mirrorbook.errors import ALREADY_CHANGED, GateRefused, MirrorbookError, Refused
from mirrorbook.mm2.offsets import InvalidOffsets
from mirrorbook.topology import TopologyError, UnknownFlow


class NotStopped(Refused):
    """The flow's MirrorSourceConnector is not STOPPED: offsets cannot change (KIP-875)."""


def not_stopped_message(connector: str) -> str:
    """Connect's own 400 text for offset changes on a RUNNING or PAUSED connector, word for word."""
    return ("Connectors must be in the STOPPED state before their offsets can be modified. This can be done "
            f"for the specified connector by issuing a 'PUT' request to the '/connectors/{connector}/stop' endpoint")


class UnknownInput(Refused):
    """A query parameter or a body a mutating route does not take: refused and named, never ignored
    (`?dry_run=true` on a route without a dry run would otherwise make the change for real)."""


class Locked(Refused):
    """Another runbook holds the flow (one change per flow at a time)."""


MESSAGE_LIMIT = 2_000
AIRFLOW_AUTH = (401, 403)  # Airflow's security dependency answers these, in its own shape


def error_response(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error_code": status, "message": cut(message, MESSAGE_LIMIT)}, status_code=status)


def invalid_request_message(exc: RequestValidationError) -> str:
    """FastAPI's first validation error, with the offending value bounded (FastAPI's own 422 echoes it whole)."""
    first = exc.errors()[0] if exc.errors() else {}
    where = " ".join(str(p) for p in first.get("loc", ()))
    got = f" (got {shown(first['input'])})" if "input" in first else ""
    return f"Invalid request: {cut(where, 100)}: {first.get('msg', 'invalid')}{got}"


def status_of(exc: Exception) -> int:
    """The HTTP status a mirrorbook failure maps to."""
    if isinstance(exc, UnknownFlow):
        return 404
    if isinstance(exc, (InvalidOffsets, NotStopped)):
        return 400
    if isinstance(exc, (Locked, FlowLocked, GateRefused)):
        return 409
    if isinstance(exc, Refused):  # any other bad input, refused before anything changed
        return 400
    if isinstance(exc, TopologyError):
        return 503
    if isinstance(exc, ConnectError):
        # Connect's 4xx keep their meaning; no answer or a 5xx from Connect is a bad gateway for us.
        if isinstance(exc, ConnectServerError) or exc.status is None:
            return 502
        return exc.status if 400 <= exc.status < 500 else 502
    return 500


class NoEncodedSeparator:
    """Refuses a path holding an encoded slash (`/A%2FB/pause`), as Jetty — Connect's server — does
    ("Ambiguous URI path separator"): the router would read it as `/A/B/pause` while a proxy or an
    audit log in front sees one segment. What is acted on must be what was asked for."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and b"%2f" in bytes(scope.get("raw_path") or b"").lower():
            await error_response(400, "Ambiguous URI path separator")(scope, receive, send)
            return
        await self.app(scope, receive, send)


def install(app: FastAPI) -> None:
    app.add_middleware(NoEncodedSeparator)

    @app.exception_handler(MirrorbookError)
    async def _mirrorbook(_: Request, exc: MirrorbookError) -> JSONResponse:
        # The message only: hints name CLI commands, and Connect errors carry the method and path. What the call
        # changed before it failed (a pause whose first connector paused) is said with it.
        changed = f"; {ALREADY_CHANGED}: {exc.changed}" if exc.changed else ""
        return error_response(status_of(exc), exc.message + changed)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(400, invalid_request_message(exc))  # bad input, as Connect says it: 400

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> Response:
        if exc.status_code in AIRFLOW_AUTH:
            return await http_exception_handler(request, exc)
        # No route, wrong method: Connect's own words for these ("HTTP 404 Not Found").
        return error_response(exc.status_code, f"HTTP {exc.status_code} {cut(str(exc.detail), 100)}")
