"""Drive the system's headless Chromium (Debian `chromium`), with cookies, over the DevTools protocol:
render a page (screenshot + the rendered DOM), or hold a tab to drive (click, wait, read form fields).
No browser download, no extra Python package (websockets ships with uvicorn's extras).

Cookies are why this is not just `chromium --screenshot URL`: the page sits behind Airflow's login,
and the command line cannot set the session cookie.
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from websockets.sync.client import connect

REPO = Path(__file__).resolve().parents[2]
KEPT = REPO / ".artifacts"  # screenshots kept after the run, for a person to look at
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-port=0"]


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def session_cookie(url: str, token: str) -> list[dict[str, Any]]:
    """Airflow's UI session: its JWT in the `_token` cookie, as its login sets it."""
    return [{"name": "_token", "value": token, "url": url, "httpOnly": True}]


def real_png(shot: Path) -> None:
    """A screenshot must be a real, non-blank PNG."""
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", shot


def keep(shot: Path) -> None:
    """Keep a screenshot in .artifacts/ (it must be a real, non-blank PNG)."""
    real_png(shot)
    KEPT.mkdir(exist_ok=True)
    shutil.copyfile(shot, KEPT / shot.name)


class _Cdp:
    """One DevTools websocket session: send a command, get its result; events seen meanwhile are kept."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        msg_id = next(self.ids)
        msg: dict[str, Any] = {"id": msg_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        while True:
            reply = json.loads(self.ws.recv(timeout=60))
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return dict(reply.get("result", {}))
            self.events.append(reply)

    def wait_event(self, method: str, timeout_s: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == method:
                    return self.events.pop(i)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {method} within {timeout_s:.0f}s")
            self.events.append(json.loads(self.ws.recv(timeout=left)))


def _devtools_endpoint(profile: Path, proc: subprocess.Popen, timeout_s: float = 30.0) -> str:
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited with {proc.returncode}")
        if port_file.exists():
            lines = port_file.read_text().split()
            if len(lines) >= 2:
                return f"ws://127.0.0.1:{lines[0]}{lines[1]}"
        time.sleep(0.1)
    raise TimeoutError("chromium did not open its DevTools port")


class Page:
    """One tab, driven over the DevTools protocol: navigate, evaluate JavaScript, wait, screenshot."""

    def __init__(self, cdp: _Cdp, session: str) -> None:
        self.cdp, self.session = cdp, session

    def _forget_loads(self) -> None:
        """Load events of pages already left: waiting for the next page must not return on one of them."""
        self.cdp.events = [e for e in self.cdp.events if e.get("method") != "Page.loadEventFired"]

    def navigate(self, url: str, timeout_s: float = 120.0) -> None:
        self._forget_loads()
        self.cdp.call("Page.navigate", self.session, url=url)
        self.cdp.wait_event("Page.loadEventFired", timeout_s)

    def click_through(self, selector: str, timeout_s: float = 180.0) -> None:
        """Click what leaves the page (a link, a form's submit button) and wait until the next page loaded
        (a form's post may call Airflow, and Airflow's UI loads a large bundle: slow on a busy machine)."""
        self._forget_loads()
        self.evaluate(f"document.querySelector({json.dumps(selector)}).click()")
        self.cdp.wait_event("Page.loadEventFired", timeout_s)

    def evaluate(self, expression: str) -> Any:
        result = self.cdp.call("Runtime.evaluate", self.session, expression=expression, returnByValue=True,
                               awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float = 60.0, what: str = "") -> Any:
        """Until `expression` is truthy (a single-page app renders after the load event)."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what or expression[:80]}: not true within {timeout_s:.0f}s")
            time.sleep(0.25)

    def dom(self) -> str:
        return str(self.evaluate("document.documentElement.outerHTML"))

    def screenshot(self, path: Path) -> None:
        shot = self.cdp.call("Page.captureScreenshot", self.session, format="png", captureBeyondViewport=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))


@contextmanager
def page(cookies: list[dict[str, Any]], size: tuple[int, int] = (1400, 1000)) -> Iterator[Page]:
    """A fresh headless Chromium (own profile, stopped afterwards) with one tab holding `cookies`."""
    exe = chromium()
    if exe is None:
        raise RuntimeError("chromium is not installed (scripts/bootstrap.sh --test installs it)")
    with tempfile.TemporaryDirectory(prefix="mb-chromium-") as profile:
        proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={profile}", f"--window-size={size[0]},{size[1]}",
                                 "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL)
        try:
            # No keepalive pings: a local DevTools socket may sit idle while a test waits on Airflow.
            with connect(_devtools_endpoint(Path(profile), proc), max_size=None, ping_interval=None) as ws:
                cdp = _Cdp(ws)
                target = cdp.call("Target.createTarget", url="about:blank")["targetId"]
                session = cdp.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
                cdp.call("Network.enable", session)
                cdp.call("Network.setCookies", session, cookies=cookies)
                cdp.call("Page.enable", session)
                cdp.call("Emulation.setDeviceMetricsOverride", session, width=size[0], height=size[1],
                         deviceScaleFactor=1, mobile=False)
                yield Page(cdp, session)
                cdp.call("Browser.close")
        finally:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def render(url: str, cookies: list[dict[str, Any]], screenshot: Path,
           size: tuple[int, int] = (1400, 1000)) -> str:
    """Load `url` with `cookies` set; write a full-page PNG to `screenshot`; return the rendered DOM."""
    with page(cookies, size) as tab:
        tab.navigate(url)
        dom = tab.dom()
        tab.screenshot(screenshot)
    return dom
