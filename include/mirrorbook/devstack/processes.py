"""JVM processes the stack starts, identified by pid *and* start time so we never signal a stranger."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Sequence

import psutil
from pydantic import BaseModel

from mirrorbook.devstack.errors import ProcessDied


class ProcessRecord(BaseModel):
    pid: int
    create_time: float
    log: str
    cmd_summary: str
    # The wall clock's boot time when the record was made. psutil derives a process's create_time() from the boot
    # time as the clock has it *now*, so setting the clock (NTP, a VM's clock sync) moves every process's start: a
    # stack that compared create_time() alone lost its own running processes to a clock step, relaunched them into
    # their own ports and deleted their data under them. Start minus boot time does not move. None: a record written
    # before this field, compared by create_time as then.
    boot_time: float | None = None

    @classmethod
    def of(cls, pid: int, log: str, cmd_summary: str) -> ProcessRecord:
        """The record of a running process: its pid and when it started."""
        try:
            created = psutil.Process(pid).create_time()
        except psutil.Error:
            created = 0.0  # gone already: the record never matches, so the caller reports the process died
        return cls(pid=pid, create_time=created, boot_time=psutil.boot_time(), log=log, cmd_summary=cmd_summary)

    def is_this(self, proc: psutil.Process) -> bool:
        """Whether `proc` is the process recorded, not a stranger that took its pid since: the same start, to a
        second, counted from boot (immune to the clock being set) where the record has its boot time."""
        if self.boot_time is None:
            return abs(proc.create_time() - self.create_time) < 1.0
        return abs((proc.create_time() - psutil.boot_time()) - (self.create_time - self.boot_time)) < 1.0

    def alive(self) -> bool:
        try:
            proc = psutil.Process(self.pid)
            return self.is_this(proc) and proc.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def rss_bytes(self) -> int:
        try:
            return psutil.Process(self.pid).memory_info().rss if self.alive() else 0
        except psutil.Error:
            return 0

    def stop(self, timeout: float = 30.0, kill: bool = False) -> None:
        """SIGTERM (or SIGKILL), wait, escalate. Idempotent: a process already gone is fine.

        Returns only once the process has fully exited: a JVM's main thread turns zombie while its
        other threads are still exiting, and its sockets (a broker's listeners) live until the last one.
        """
        if self.exited():
            return
        try:
            os.kill(self.pid, signal.SIGKILL if kill else signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.exited():
                return
            time.sleep(0.1)
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        while not self.exited():
            time.sleep(0.05)

    def exited(self) -> bool:
        """Gone for good: reaped (if it is our child), or no thread of it left."""
        try:
            if os.waitpid(self.pid, os.WNOHANG)[0] == self.pid:
                return True
        except ChildProcessError:
            pass
        try:
            proc = psutil.Process(self.pid)
            if not self.is_this(proc):
                return True  # the pid now belongs to someone else
            return proc.status() == psutil.STATUS_ZOMBIE and proc.num_threads() <= 1
        except psutil.Error:
            return True


def start_java(java: str, jvm_opts: list[str], classpath: str, main: str, args: list[str],
               log_path: Path, label: str) -> ProcessRecord:
    """Start a JVM detached from our session so it survives the CLI invocation that started it."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [java, *jvm_opts, "-cp", classpath, main, *args]
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, close_fds=True)
    return ProcessRecord.of(proc.pid, str(log_path), f"{label}: {main} {' '.join(args)}")


def run_java(java: str, jvm_opts: list[str], classpath: str, main: str, args: list[str],
             log_path: Path, label: str, timeout: float = 120, *, secret_args: Sequence[str] = (),
             argfile: Path | None = None) -> str:
    """Run a short-lived JVM tool to completion; a failure names its log.

    `secret_args` (appended to `args`) reach the tool through `argfile`, a 0600 file of one argument a line that
    Kafka's tools read in place of `@argfile` (argparse4j's file prefix), so they never show on a command line;
    the file is removed when the tool is done."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [java, *jvm_opts, "-cp", classpath, main, *args]
    if secret_args:
        assert argfile is not None, "secret arguments need an argument file"
        from mirrorbook.devstack.security import write_private

        write_private(argfile, "".join(f"{a}\n" for a in secret_args).encode())
        cmd.append(f"@{argfile}")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    finally:
        if secret_args and argfile is not None:
            argfile.unlink(missing_ok=True)
    log_path.write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise ProcessDied(f"{label} failed (exit {proc.returncode}); its output is in {log_path}:\n"
                          + "\n".join("    " + ln for ln in (proc.stdout + proc.stderr).splitlines()[-10:]))
    return proc.stdout


def died_error(rec: ProcessRecord, label: str) -> ProcessDied:
    tail = ""
    try:
        lines = Path(rec.log).read_text(errors="replace").splitlines()
        interesting = [ln for ln in lines if "ERROR" in ln or "Exception" in ln or "Error:" in ln] or lines
        tail = "\n".join("    " + ln for ln in interesting[-8:])
    except OSError:
        pass
    return ProcessDied(f"The {label} JVM (pid {rec.pid}) died during start; its log is {rec.log}\n{tail}",
                       f"read {rec.log}; then `mirrorbook devstack down` and `up` again")
