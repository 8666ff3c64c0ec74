"""A stack's process records name their processes through a setting of the clock.

psutil's create_time() is the boot time as the clock has it now plus the ticks since boot: setting the clock moves
every process's start. A CI run once lost its whole session stack that way — every record read as dead, `up`
relaunched brokers into their own ports, `down` deleted the data of brokers still running. Setting the machine's
clock inside a test would move it under everything else running, so a step is simulated the only faithful way: a
record made while the clock read `shift` seconds differently has both its times moved by `shift`."""

from __future__ import annotations

import os
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from mirrorbook.devstack.processes import ProcessRecord


def _made_when_the_clock_read(shift: float, record: ProcessRecord) -> ProcessRecord:
    assert record.boot_time is not None
    return record.model_copy(update={"create_time": record.create_time + shift,
                                     "boot_time": record.boot_time + shift})


@given(st.floats(-30 * 86400, 30 * 86400).filter(lambda s: abs(s) >= 1.0))
def test_a_running_process_stays_itself_when_the_clock_is_set(shift):
    me = _made_when_the_clock_read(shift, ProcessRecord.of(os.getpid(), "log", "this test"))
    assert me.alive() and not me.exited()


def test_a_stranger_on_the_pid_is_not_the_process_recorded():
    me = ProcessRecord.of(os.getpid(), "log", "this test")
    started_later = me.model_copy(update={"create_time": me.create_time + 5})
    assert not started_later.alive() and started_later.exited()


def test_a_record_from_before_boot_times_is_still_read_by_its_start():
    me = ProcessRecord.of(os.getpid(), "log", "this test")
    old = ProcessRecord.model_validate({"pid": me.pid, "create_time": me.create_time, "log": "log",
                                        "cmd_summary": "a state file from an earlier release"})
    assert old.boot_time is None and old.alive()


def test_a_process_that_ended_is_gone_and_its_record_says_so():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    record = ProcessRecord.of(child.pid, "log", "a child")
    child.wait()
    assert not record.alive() and record.exited()
    record.stop(timeout=1)  # idempotent on a process already gone
