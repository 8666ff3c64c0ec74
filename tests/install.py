"""mirrorbook as a deployment gets it: the README's install block, run as written — the wheel built from a copy of
this checkout, the lock installed into a fresh venv outside the checkout (nothing of include/, spark_apps/ or dags/
on its path), the wheel on top, and the DAG folder written by `mirrorbook dags install` — then `pip check`.

Building it costs a minute and a half, mostly pip unpacking the lock from its cache: the session starts it in the
background as soon as a collected test asks for it (tests/conftest.py), and the test that needs it first waits.
tests/dags/test_installed.py claims the block (tests/docs.py) and checks that it is what ran.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


INSTALL_BLOCK = "tests/dags/test_installed.py::test_the_installed_package_is_all_a_deployment_has"


@dataclass(frozen=True)
class Installed:
    venv: Path
    dags: Path  # the DAG folder `mirrorbook dags install` wrote
    wheel: Path
    sdist: Path
    script: str  # what ran: the README's install block

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)

    def env(self, base: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
        """An environment that sees only the installed package: no PYTHONPATH, the venv's bin first on PATH (its
        `airflow`, `spark-submit` and `mirrorbook`), no setting of the test session's Airflow."""
        env = {k: v for k, v in (os.environ if base is None else base).items()
               if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith("AIRFLOW")}
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}/usr/local/bin{os.pathsep}/usr/bin{os.pathsep}/bin"
        return {**env, **extra}


def _run(cmd: list[str], **kw: object) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)  # type: ignore[call-overload]
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def copy_checkout(into: Path) -> Path:
    """The checkout's files (tracked, and new ones git does not ignore) copied to `into`, its `.venv` the venv this
    session runs in — a checkout as the README's reader has one after `make install`, whose `dist/` is its own."""
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file() and not src.is_symlink():
            (into / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, into / rel)
    (into / ".venv").symlink_to(sys.prefix)
    return into


def build_and_install(into: Path) -> Installed:
    """The README's install block as written, from a copy of the checkout, with HOME and AIRFLOW_HOME in `into`:
    `python -m build` (the sdist, then the wheel built from it, so the sdist is complete too; `--no-isolation`: with
    the lock's setuptools), the lock into a new venv by the recipe every install uses (scripts/install-lock.sh), the
    wheel without dependencies on top, the DAG files. Then `pip check`."""
    from tests import docs

    script = docs.block(INSTALL_BLOCK).text
    checkout, home = copy_checkout(into / "checkout"), into / "home"
    home.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith("AIRFLOW")}
    env.update(HOME=str(home), AIRFLOW_HOME=str(home / "airflow"))
    _run(["bash", "-euc", script], cwd=checkout, env=env)
    [wheel], [sdist] = sorted((checkout / "dist").glob("*.whl")), sorted((checkout / "dist").glob("*.tar.gz"))
    venv = home / "airflow-venv"
    _run([str(venv / "bin" / "pip"), "check"], cwd=into, env=env)
    return Installed(venv=venv, dags=home / "airflow" / "dags", wheel=wheel, sdist=sdist, script=script)


class Background:
    """The installation, made in a thread of its own from the moment it is started; `result()` waits for it."""

    def __init__(self, into: Path) -> None:
        self.into = into
        self._done: Installed | BaseException | None = None
        self._thread = threading.Thread(target=self._make, name="mirrorbook-install", daemon=True)

    def start(self) -> "Background":
        self._thread.start()
        return self

    def _make(self) -> None:
        try:
            self._done = build_and_install(self.into)
        except BaseException as exc:  # kept for the test that waits: it fails with this
            self._done = exc

    def result(self, timeout_s: float = 900) -> Installed:
        self._thread.join(timeout_s)
        if self._done is None:
            raise TimeoutError(f"installing mirrorbook into {self.into} took more than {timeout_s:.0f} s")
        if isinstance(self._done, BaseException):
            raise self._done
        return self._done
