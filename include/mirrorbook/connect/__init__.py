"""Kafka Connect REST client (KIP-875 offsets, STOPPED state), framework-free, sync and async."""

from mirrorbook.connect.client import AsyncConnectClient, ConnectClient, ConnectSettings
from mirrorbook.connect.errors import (
    ConnectAuthRefused,
    ConnectRefusal,
    ConnectError,
    ConnectorNotFound,
    ConnectorNotStopped,
    ConnectBadRequest,
    ConnectConflict,
    ConnectDeadlineExceeded,
    ConnectServerError,
    ConnectTimeout,
    ConnectTlsError,
    ConnectUnreachable,
)

__all__ = [
    "AsyncConnectClient", "ConnectClient", "ConnectSettings", "ConnectError", "ConnectorNotFound",
    "ConnectorNotStopped", "ConnectBadRequest", "ConnectConflict", "ConnectDeadlineExceeded", "ConnectServerError",
    "ConnectTimeout", "ConnectUnreachable", "ConnectAuthRefused", "ConnectRefusal", "ConnectTlsError",
]
