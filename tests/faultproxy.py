"""A local HTTP proxy in front of the real Connect REST API that injects faults and logs every request.

Not a mock: every request that is not faulted is forwarded to the real worker, and the log shows
exactly which calls reached the proxy (e.g. to prove that no PATCH was sent).
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx


@dataclass
class Fault:
    """Answer `status` (with Connect's error body) to the next `count` requests matching method/path."""

    status: int  # 0: forward to Connect (after `delay_s`) instead of answering
    count: int = 1
    method: str | None = None
    path: str | None = None  # regex searched in the path
    message: str = "injected fault"
    delay_s: float = 0.0

    def matches(self, method: str, path: str) -> bool:
        return self.count > 0 and (self.method in (None, method)) and (self.path is None or re.search(self.path, path))


@dataclass
class Logged:
    method: str
    path: str
    body: Any
    status: int
    faulted: bool
    authorized: bool = False


@dataclass
class FaultProxy:
    upstream: str
    faults: list[Fault] = field(default_factory=list)
    log: list[Logged] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._http = httpx.Client(base_url=self.upstream, timeout=60)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                status, headers, payload, faulted = proxy._answer(self.command, self.path, raw, dict(self.headers))
                with proxy._lock:
                    proxy.log.append(Logged(self.command, self.path.split("?")[0],
                                            json.loads(raw) if raw else None, status, faulted,
                                            "Authorization" in self.headers))
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_PUT = do_POST = do_PATCH = do_DELETE = _handle

        self._server = ThreadingHTTPServer(("localhost", 0), Handler)
        self.url = f"http://localhost:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _answer(self, method: str, path: str, raw: bytes, headers: dict[str, str]) -> tuple[int, dict, bytes, bool]:
        with self._lock:
            fault = next((f for f in self.faults if f.matches(method, path.split("?")[0])), None)
            if fault:
                fault.count -= 1
        if fault and fault.delay_s:
            time.sleep(fault.delay_s)
        if fault and fault.status:
            body = json.dumps({"error_code": fault.status, "message": fault.message}).encode()
            return fault.status, {"Content-Type": "application/json"}, body, True
        fwd = {k: v for k, v in headers.items() if k.lower() in ("content-type", "authorization", "accept")}
        resp = self._http.request(method, path, content=raw or None, headers=fwd)
        out = {"Content-Type": resp.headers.get("content-type", "application/json")}
        return resp.status_code, out, resp.content, bool(fault)

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
