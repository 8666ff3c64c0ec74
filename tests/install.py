"""mirrorbook as a deployment gets it: the wheel built from this checkout, installed with the lock into a fresh venv
outside the checkout (nothing of include/, spark_apps/ or dags/ on its path), and the DAG folder written by
`mirrorbook dags install`, as README's "Installing into your Airflow" says.

Building it costs a minute and a half, mostly pip unpacking the lock from its cache: the session starts it in the
background as soon as a collected test asks for it (tests/conftest.py), and the test that needs it first waits.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Installed:
    venv: Path
    dags: Path  # the DAG folder `mirrorbook dags install` wrote
    wheel: Path
    sdist: Path

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


def build_and_install(into: Path) -> Installed:
    """`python -m build` (the sdist, then the wheel built from it, so the sdist is complete too), the lock into a new
    venv by the recipe every install uses (scripts/install-lock.sh), the wheel without dependencies on top, then the
    DAG files. Run from `into`, never from the checkout."""
    into.mkdir(parents=True, exist_ok=True)
    dist = into / "dist"
    # --no-isolation: built with the lock's setuptools, not one fetched for the build.
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(REPO)], cwd=into)
    [wheel], [sdist] = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    venv = into / "venv"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    _run([str(REPO / "scripts" / "install-lock.sh"), str(venv)], cwd=into, env=env)
    _run([str(venv / "bin" / "pip"), "install", "-q", "--no-deps", str(wheel)], cwd=into, env=env)
    _run([str(venv / "bin" / "pip"), "check"], cwd=into, env=env)
    installed = Installed(venv=venv, dags=into / "dags", wheel=wheel, sdist=sdist)
    _run([installed.bin("mirrorbook"), "dags", "install", str(installed.dags)], cwd=into, env=installed.env())
    return installed


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
