"""A local HTTP proxy in front of the real Connect REST API that injects faults and logs every request.

Not a mock: every request that is not faulted is forwarded to the real worker, and the log shows
exactly which calls reached the proxy (e.g. to prove that no PATCH was sent). A request is logged when
it arrives, so a request whose client gave up waiting (a delay fault) is counted all the same.
"""

from __future__ import annotations

import json
import re
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx


@dataclass
class Fault:
    """Answer `status` (with Connect's error body) to the next `count` requests matching method/path,
    `delay_s` late. With status 0 the request is forwarded to Connect at once and Connect's own answer is
    held `delay_s`: Connect acted, the client only hears of it late (or never, if it times out)."""

    status: int  # 0: forward to Connect instead of answering
    count: int = 1
    method: str | None = None
    path: str | None = None  # regex searched in the path
    message: str = "injected fault"
    delay_s: float = 0.0

    @classmethod
    def delay(cls, seconds: float, *, status: int = 0, count: int = 1, method: str | None = None,
              path: str | None = None, message: str = "injected fault") -> "Fault":
        """A slow Connect: hold the answer (Connect's own, or `status`) `seconds` before sending it."""
        return cls(status, count=count, method=method, path=path, message=message, delay_s=seconds)

    def matches(self, method: str, path: str) -> bool:
        return self.count > 0 and (self.method in (None, method)) and (self.path is None or re.search(self.path, path))


@dataclass
class Logged:
    method: str
    path: str
    body: Any
    authorized: bool = False
    arrived: float = 0.0  # time.monotonic() when the request reached the proxy
    status: int | None = None  # None until known (Connect answered, or the fault chose)
    faulted: bool = False


@dataclass
class FaultProxy:
    """`verify`: how the proxy checks an HTTPS upstream (a CA file); `tls`: (certificate, key) PEM files it serves
    HTTPS with itself — in front of a secured worker, the client's TLS and basic auth are what they would be
    without the proxy (the Authorization header is passed on)."""

    upstream: str
    faults: list[Fault] = field(default_factory=list)
    log: list[Logged] = field(default_factory=list)
    verify: bool | str = True
    tls: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._http = httpx.Client(base_url=self.upstream, timeout=60, verify=self.verify)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                entry = Logged(self.command, self.path.split("?")[0], json.loads(raw) if raw else None,
                               "Authorization" in self.headers, time.monotonic())
                with proxy._lock:
                    proxy.log.append(entry)
                status, headers, payload = proxy._answer(entry, self.path, raw, dict(self.headers))
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client stopped waiting (its timeout): no one to answer

            do_GET = do_PUT = do_POST = do_PATCH = do_DELETE = _handle

        self._server = ThreadingHTTPServer(("localhost", 0), Handler)
        if self.tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*self.tls)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.url = f"{'https' if self.tls else 'http'}://localhost:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _answer(self, entry: Logged, path: str, raw: bytes, headers: dict[str, str]) -> tuple[int, dict, bytes]:
        """The answer to one request; its status is logged as soon as it is known (before any hold)."""
        method = entry.method
        with self._lock:
            fault = next((f for f in self.faults if f.matches(method, entry.path)), None)
            if fault:
                fault.count -= 1
        entry.faulted = fault is not None
        if fault and fault.status:
            entry.status = fault.status
            time.sleep(fault.delay_s)
            body = json.dumps({"error_code": fault.status, "message": fault.message}).encode()
            return fault.status, {"Content-Type": "application/json"}, body
        fwd = {k: v for k, v in headers.items() if k.lower() in ("content-type", "authorization", "accept")}
        resp = self._http.request(method, path, content=raw or None, headers=fwd)
        entry.status = resp.status_code
        if fault:
            time.sleep(fault.delay_s)
        out = {"Content-Type": resp.headers.get("content-type", "application/json")}
        return resp.status_code, out, resp.content

    def calls(self, method: str | None = None, path: str | None = None, faulted: bool | None = None) -> list[Logged]:
        with self._lock:
            return [c for c in self.log if (method in (None, c.method)) and (path is None or re.search(path, c.path))
                    and (faulted is None or c.faulted == faulted)]

    def __enter__(self) -> "FaultProxy":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._http.close()
