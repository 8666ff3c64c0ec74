"""A real Airflow for end-to-end tests: `airflow standalone` (scheduler, dag-processor, api-server,
triggerer) in a home of its own, on a free port — of the installed product (tests/install.py: the wheel in a venv
of its own, its DAG folder written by `mirrorbook dags install`), or of this checkout (the benchmarks').

Started in its own process session; stopped by the pids it started (the standalone parent and every
descendant it spawned), never by name.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

from tests.install import Installed

REPO = Path(__file__).resolve().parents[2]
USERS = "admin:admin,ops:viewer"
PASSWORDS_FILE = "simple_auth_manager_passwords.json.generated"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return int(s.getsockname()[1])


@dataclass
class AirflowServer:
    home: Path
    port: int
    process: subprocess.Popen
    log_path: Path
    env: dict[str, str]
    children: dict[int, psutil.Process] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://localhost:{self.port}"

    def passwords(self) -> dict[str, str]:
        return json.loads((self.home / PASSWORDS_FILE).read_text())

    def token(self, user: str) -> str:
        r = httpx.post(f"{self.url}/auth/token", json={"username": user, "password": self.passwords()[user]},
                       timeout=30)
        r.raise_for_status()
        return str(r.json()["access_token"])

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def remember_children(self) -> None:
        """Record every process standalone spawned, so stop() ends exactly those."""
        try:
            for child in psutil.Process(self.process.pid).children(recursive=True):
                self.children.setdefault(child.pid, child)  # psutil.Process notices pid reuse
        except psutil.NoSuchProcess:
            pass


def airflow_env(home: Path, port: int, extra: dict[str, str], installed: Installed | None = None) -> dict[str, str]:
    if installed is None:  # this checkout, from its venv
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        env.update({"PYTHONPATH": str(REPO), "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
                    # standalone starts its components as `airflow …` from PATH: this venv's.
                    "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"})
    else:  # the installed product: only its venv (mirrorbook's plugin comes with it, by its entry point)
        env = installed.env(AIRFLOW__CORE__DAGS_FOLDER=str(installed.dags))
    (home / "plugins").mkdir(exist_ok=True)
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": USERS,
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": f"http://localhost:{port}",
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://localhost:{port}/execution/",
        # The scheduler's and triggerer's log servers default to fixed ports: other stacks may hold them.
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
        # A fresh API server's first task start (its cold path) took 100+ s on a machine at load 20: the worker's
        # default 5 s per request (5 tries) gave up, twice, and failed the task before a line of it ran.
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        **extra,
    })
    return env


# What docs/operating.md has a deployment put in $AIRFLOW_HOME/config ("Scheduler settings for a fast cutover").
LOCAL_SETTINGS = "import mirrorbook.airflow.preload\n"


def start(home: Path, extra_env: dict[str, str], preload: bool = True,
          installed: Installed | None = None) -> AirflowServer:
    """`airflow standalone` in `home`, of `installed` (else of this checkout); with `preload`, set up as
    docs/operating.md recommends (mirrorbook's task modules imported once in the scheduler, before it forks task
    processes)."""
    home.mkdir(parents=True, exist_ok=True)
    if preload:
        (home / "config").mkdir(exist_ok=True)
        (home / "config" / "airflow_local_settings.py").write_text(LOCAL_SETTINGS)
    port = free_port()
    env = airflow_env(home, port, extra_env, installed)
    log_path = home / "standalone.log"
    airflow = installed.bin("airflow") if installed else str(Path(sys.executable).with_name("airflow"))
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([airflow, "standalone"], cwd=home, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    return AirflowServer(home=home, port=port, process=proc, log_path=log_path, env=env)


def wait_ready(server: AirflowServer, dag_ids: list[str], timeout_s: float = 180.0) -> None:
    """Until the API answers, the auth manager wrote the passwords, and every DAG in `dag_ids` is parsed."""
    deadline = time.monotonic() + timeout_s
    last = "not started"
    while time.monotonic() < deadline:
        server.remember_children()
        if server.process.poll() is not None:
            raise RuntimeError(f"airflow standalone exited ({server.process.returncode}):\n{server.log_tail()}")
        try:
            if not (server.home / PASSWORDS_FILE).exists():
                last = "no passwords file yet"
            else:
                headers = {"Authorization": f"Bearer {server.token('admin')}"}
                got = httpx.get(f"{server.url}/api/v2/dags", params={"limit": 100}, headers=headers, timeout=10)
                got.raise_for_status()
                parsed = {d["dag_id"] for d in got.json()["dags"]}
                missing = sorted(set(dag_ids) - parsed)
                health = httpx.get(f"{server.url}/api/v2/monitor/health", timeout=10).json()
                unhealthy = [c for c in ("scheduler", "triggerer", "dag_processor")
                             if (health.get(c) or {}).get("status") != "healthy"]
                if not missing and not unhealthy:
                    server.remember_children()
                    return
                last = f"DAGs not parsed yet: {missing}; components not healthy: {unhealthy}"
        except (httpx.HTTPError, KeyError, ValueError) as exc:
            last = f"{type(exc).__name__}: {exc}"
        time.sleep(1.0)
    raise TimeoutError(f"Airflow not ready after {timeout_s:.0f}s ({last}):\n{server.log_tail()}")


def stop(server: AirflowServer, timeout_s: float = 20.0) -> None:
    """SIGTERM to standalone and every process it started (each component shuts down on it), SIGKILL
    to whatever is left after `timeout_s`. Only these pids: nothing else is touched."""
    server.remember_children()
    procs = [p for p in server.children.values() if p.is_running()]
    try:
        procs.append(psutil.Process(server.process.pid))
    except psutil.NoSuchProcess:
        pass
    for p in procs:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(procs, timeout=timeout_s)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=5)
    try:
        server.process.wait(timeout=5)  # reap it
    except subprocess.TimeoutExpired:
        pass
