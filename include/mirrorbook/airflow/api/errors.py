"""Errors of the flows API, answered the way Connect answers: `{"error_code": N, "message": "..."}`.

KIP-1144 puts the flows API on top of Connect and keeps Connect's semantics for offsets, so a
client that already handles Connect's errors handles ours. Only Airflow's own auth refusals
(401/403 from its security dependency) keep Airflow's `{"detail": ...}` shape.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from mirrorbook.audit import FlowLocked
from mirrorbook.connect.errors import ConnectError, ConnectServerError
from mirrorbook.errors import MirrorbookError, Refused
from mirrorbook.mm2.offsets import InvalidOffsets
from mirrorbook.runbooks.engine import GateRefused
from mirrorbook.topology import TopologyError, UnknownFlow


class NotStopped(Refused):
    """The flow's MirrorSourceConnector is not STOPPED: offsets cannot change (KIP-875)."""


def not_stopped_message(connector: str) -> str:
    """Connect's own 400 text for offset changes on a RUNNING or PAUSED connector, word for word."""
    return ("Connectors must be in the STOPPED state before their offsets can be modified. This can be done "
            f"for the specified connector by issuing a 'PUT' request to the '/connectors/{connector}/stop' endpoint")


class Locked(Refused):
    """Another runbook holds the flow (one change per flow at a time)."""


def error_response(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error_code": status, "message": message}, status_code=status)


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


def install(app: FastAPI) -> None:
    @app.exception_handler(MirrorbookError)
    async def _mirrorbook(_: Request, exc: MirrorbookError) -> JSONResponse:
        # The message only: hints name CLI commands, and Connect errors carry the method and path.
        return error_response(status_of(exc), exc.message)
