"""A throwaway PostgreSQL cluster for tests: initdb into a temp dir, pg_ctl on a free port, unix
socket in the same dir, fsync off; stopped and deleted at the end. initdb refuses to run as root, so
as root the cluster runs as the system user `mirrorbook-pg` (created on first use)."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

from sqlalchemy import create_engine, text

OS_USER = "mirrorbook-pg"
DB_USER = "mirrorbook"
INSTALL_HINT = "install it: apt-get install -y postgresql (or run `make install-test`)"


class PgUnavailable(RuntimeError):
    pass


def find_bindir() -> Path:
    """The newest /usr/lib/postgresql/*/bin with initdb and pg_ctl (Debian), else those on PATH."""
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name)
                        if p.parent.name.isdigit() else 0, reverse=True)
    for d in candidates:
        if (d / "initdb").exists() and (d / "pg_ctl").exists():
            return d
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(on_path).parent
    raise PgUnavailable(f"PostgreSQL server binaries (initdb, pg_ctl) not found; {INSTALL_HINT}")


def _ensure_os_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(OS_USER)
    except KeyError:
        pass
    proc = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OS_USER],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise PgUnavailable(f"running as root and could not create the user {OS_USER} for PostgreSQL: "
                            f"{proc.stderr.strip()}")
    return pwd.getpwnam(OS_USER)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgCluster:
    def __init__(self) -> None:
        self.bindir = find_bindir()
        self.as_user = _ensure_os_user() if os.geteuid() == 0 else None
        self.base = Path(tempfile.mkdtemp(prefix="mirrorbook-pg-"))
        if self.as_user:
            os.chown(self.base, self.as_user.pw_uid, self.as_user.pw_gid)
        self.data = self.base / "data"
        self.log = self.base / "postgres.log"
        self.port = 0

    def _run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if self.as_user:
            cmd = ["runuser", "-u", self.as_user.pw_name, "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=self.base)

    def _check(self, proc: subprocess.CompletedProcess[str], what: str) -> None:
        if proc.returncode != 0:
            log = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise PgUnavailable(f"{what} failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}\n{log}")

    def start(self) -> "PgCluster":
        self._check(self._run("initdb", "-D", str(self.data), "-U", DB_USER, "--auth=trust", "--no-sync",
                              "-E", "UTF8", "--locale=C"), "initdb")
        for _ in range(3):  # a free port can be taken between probing and binding
            self.port = _free_port()
            opts = (f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c fsync=off "
                    "-c synchronous_commit=off -c full_page_writes=off -c max_connections=100")
            proc = self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "30",
                             "-o", opts, "start")
            if proc.returncode == 0:
                return self
        self._check(proc, "pg_ctl start")
        return self

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.base, ignore_errors=True)

    def url(self, schema: str | None = None) -> str:
        base = f"postgresql+psycopg2://{DB_USER}@127.0.0.1:{self.port}/postgres"
        return f"{base}?options=-csearch_path%3D{schema}" if schema else base

    def new_schema_url(self) -> str:
        """A URL whose search_path is a fresh, empty schema: one per test, no CREATE DATABASE cost."""
        schema = f"t_{uuid.uuid4().hex[:12]}"
        engine = create_engine(self.url())
        try:
            with engine.begin() as conn:
                conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        finally:
            engine.dispose()
        return self.url(schema)
