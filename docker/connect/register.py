"""Registers MM2 connectors on a Kafka Connect worker and waits until they run (compose's one-shot init).

Why a script and not `curl`: it must wait for the worker to join its group, PUT only configs that
differ (so re-running `docker compose up` changes nothing on a configured worker), retry Connect's
409 (rebalance) and 5xx, and fail loudly when a connector does not reach RUNNING. Standard library
only, so it runs on the plain official `python` image.

    python register.py --url http://connect-b:8083 /connectors/A-B
    python register.py --url https://connect-b:8083 --cafile ca.pem --credentials FILE /connectors/A-B

A secured worker (docker-compose.secure.yml): HTTPS verified against --cafile, basic auth with the
`user:password` line of --credentials (a 0600 file: the password is never on a command line).
"""

from __future__ import annotations

import argparse
import base64
import json
import ssl
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote

RETRYABLE = {409, 500, 502, 503, 504}
CHECKPOINT_CLASS = "MirrorCheckpointConnector"


class ConnectUnavailable(Exception):
    pass


# How every request reaches the worker: a TLS context for https (--cafile) and basic-auth headers (--credentials).
TLS: ssl.SSLContext | None = None
AUTH: dict[str, str] = {}


def call(url: str, method: str = "GET", body: dict[str, Any] | None = None) -> tuple[int, Any]:
    """One request; returns (status, parsed JSON or None). Connection errors raise ConnectUnavailable."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", "Accept": "application/json", **AUTH})
    try:
        with urllib.request.urlopen(req, timeout=30, context=TLS) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            return exc.code, json.loads(raw) if raw else None
        except ValueError:
            return exc.code, {"message": raw.decode(errors="replace")}
    except (urllib.error.URLError, OSError) as exc:
        raise ConnectUnavailable(str(exc)) from exc


def call_retrying(url: str, method: str, deadline: float, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    """`call`, retried with backoff on connection errors, 409 and 5xx until `deadline`."""
    delay = 0.5
    while True:
        try:
            status, payload = call(url, method, body)
            if status not in RETRYABLE:
                return status, payload
            why = f"HTTP {status}: {(payload or {}).get('message', '')}"
        except ConnectUnavailable as exc:
            why = str(exc)
        if time.monotonic() + delay > deadline:
            raise SystemExit(f"giving up on {method} {url}: {why}")
        time.sleep(delay)
        delay = min(delay * 2, 5.0)


def load_connectors(paths: list[Path]) -> list[dict[str, Any]]:
    """Connector definitions ({name, config}) from files and directories of *.json files, in name order."""
    files: list[Path] = []
    for p in paths:
        files.extend(sorted(p.glob("*.json")) if p.is_dir() else [p])
    if not files:
        raise SystemExit(f"no connector files in {', '.join(map(str, paths))}")
    out = []
    for f in files:
        spec = json.loads(f.read_text())
        if not isinstance(spec.get("name"), str) or not isinstance(spec.get("config"), dict):
            raise SystemExit(f"{f}: expected {{\"name\": ..., \"config\": {{...}}}}")
        out.append(spec)
    return out


def ensure(base: str, spec: dict[str, Any], deadline: float) -> str:
    """PUT the config unless the worker already has exactly these values; returns what happened."""
    name, cfg = spec["name"], {k: str(v) for k, v in spec["config"].items()}
    path = f"{base}/connectors/{quote(name, safe='')}/config"
    status, current = call_retrying(path, "GET", deadline)
    if status == 200 and all(current.get(k) == v for k, v in cfg.items()):
        return "unchanged"
    status, payload = call_retrying(path, "PUT", deadline, cfg)
    if status not in (200, 201):
        raise SystemExit(f"PUT {name} failed: HTTP {status}: {(payload or {}).get('message', payload)}")
    return "created" if status == 201 else "updated"


def running(status: dict[str, Any], connector_class: str) -> bool:
    """RUNNING with all tasks RUNNING; a checkpoint connector may run no task until a group qualifies."""
    tasks = status.get("tasks") or []
    min_tasks = 0 if connector_class.endswith(CHECKPOINT_CLASS) else 1
    return (status.get("connector", {}).get("state") == "RUNNING" and len(tasks) >= min_tasks
            and all(t.get("state") == "RUNNING" for t in tasks))


def wait_running(base: str, specs: list[dict[str, Any]], deadline: float) -> dict[str, dict[str, Any]]:
    last: dict[str, dict[str, Any]] = {}
    while True:
        for spec in specs:
            _, st = call_retrying(f"{base}/connectors/{quote(spec['name'], safe='')}/status", "GET", deadline)
            last[spec["name"]] = st or {}
        if all(running(last[s["name"]], s["config"]["connector.class"]) for s in specs):
            return last
        if time.monotonic() > deadline:
            states = {n: (s.get("connector", {}).get("state"), [t.get("state") for t in s.get("tasks", [])])
                      for n, s in last.items()}
            raise SystemExit(f"connectors not RUNNING in time: {states}")
        time.sleep(1.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="Connect REST URL, e.g. http://connect-b:8083")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds for everything (default 300)")
    parser.add_argument("--cafile", help="CA file the worker's HTTPS certificate is verified against")
    parser.add_argument("--credentials", type=Path, help="a file holding the basic-auth `user:password` line")
    parser.add_argument("paths", nargs="+", type=Path, help="connector JSON files or directories of them")
    args = parser.parse_args(argv)
    global TLS, AUTH
    if args.cafile:
        TLS = ssl.create_default_context(cafile=args.cafile)
    if args.credentials:
        token = base64.b64encode(args.credentials.read_text().strip().encode()).decode()
        AUTH = {"Authorization": f"Basic {token}"}
    base = args.url.rstrip("/")
    deadline = time.monotonic() + args.timeout
    specs = load_connectors(args.paths)
    # GET /connectors answers only once the worker has joined its group and read its config topic.
    call_retrying(f"{base}/connectors", "GET", deadline)
    for spec in specs:
        print(f"{spec['name']}: {ensure(base, spec, deadline)}", flush=True)
    for name, st in wait_running(base, specs, deadline).items():
        print(f"{name}: {st['connector']['state']} tasks={[t['state'] for t in st.get('tasks', [])]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
