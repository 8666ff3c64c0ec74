"""Benchmark: how long the devstack takes to start, and how much memory it holds.

Each run starts `DevStack.up(StackSettings(reverse=True))` (brokers A and B, Connect workers on B
and A, both flows' MM2 connectors) in a fresh temporary run dir and times it until every connector
and every task reports RUNNING. Meanwhile a sampler sums the resident memory (RSS) of the stack's
JVMs every 0.2 s — during startup and for --load-s seconds afterwards, while a small workload
produces to A and MM2 mirrors it to B — and keeps the peak. Then `down(purge=True)`.
The jars are fetched (or found in the cache) before any timing. Runs --runs times; reports medians.

Run on demand:  .venv/bin/python benchmarks/devstack_start.py [--runs 3] [--load-s 20] [--secure]
The last two lines are `RESULT devstack_start_s=<v> s` and `RESULT devstack_rss_mib=<v> MiB`.
Targets on 2 cores: start under 90 s, peak RSS under 3 GiB. Other processes on the machine skew
both; the load average printed before each run says how busy it was.

With --secure each run starts the plaintext stack and then the secured one (`devstack up --secure`:
SASL_SSL brokers with ACLs, Connect on HTTPS + basic auth; its CA and secrets made fresh, as a first `up`
makes them), side by side in one process, and adds `RESULT devstack_start_secure_s`,
`RESULT devstack_rss_secure_mib` and `RESULT secure_start_ratio` (secured / plaintext, target <= 2).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

import psutil

from mirrorbook.devstack import artifacts
from mirrorbook.devstack.config import StackSettings
from mirrorbook.devstack.stack import DevStack
from mirrorbook.devstack.workload import GroupSpec, load, produce
from mirrorbook.kafka.admin import KafkaAdmin

SAMPLE_EVERY_S = 0.2
MIB = 1024 * 1024


class RssSampler(threading.Thread):
    """Samples the summed RSS of the JVMs the stack in `run_dir` has started (read from its stack.json)."""

    def __init__(self, stack: DevStack) -> None:
        super().__init__(daemon=True)
        self.stack = stack
        self.peak = 0
        self.samples = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            self.peak = max(self.peak, self.current())
            self.samples += 1
            self._halt.wait(SAMPLE_EVERY_S)

    def current(self) -> int:
        try:
            state = self.stack.load()
        except (OSError, ValueError):  # stack.json being replaced at this instant
            return 0
        if state is None:
            return 0
        total = 0
        for rec in state.processes().values():
            try:
                total += psutil.Process(rec.pid).memory_info().rss if rec.alive() else 0
            except psutil.Error:
                pass
        return total

    def stop(self) -> int:
        self._halt.set()
        self.join()
        return self.peak


def all_running(stack: DevStack) -> bool:
    """Every connector of every flow RUNNING and all of its tasks RUNNING."""
    for flow in stack.status()["flows"]:
        for c in flow["connectors"].values():
            if c["state"] != "RUNNING" or any(t != "RUNNING" for t in c["tasks"]):
                return False
    return True


def start(stack: DevStack, timeout_s: float = 300.0, secure: bool = False) -> float:
    t0 = time.monotonic()
    stack.up(StackSettings(reverse=True, secure=secure), timeout_s=timeout_s)
    while not all_running(stack):
        if time.monotonic() - t0 > timeout_s:
            raise SystemExit(f"connectors not all RUNNING after {timeout_s:.0f}s: {stack.status()['flows']}")
        time.sleep(0.2)
    return time.monotonic() - t0


def small_load(stack: DevStack, seconds: float) -> int:
    """Produce to A in small batches for `seconds` (MM2 mirrors it to B); park a group once."""
    bootstrap = stack.require().kafka_config("A", "app")  # the workload's principal on a secured stack
    topic = "bench-load"
    load(bootstrap, [topic], partitions=3, records_per_partition=500,
         groups=[GroupSpec(name="bench", position="end-50")])
    admin = KafkaAdmin(bootstrap)
    produced, deadline = 1500, time.monotonic() + seconds
    while time.monotonic() < deadline:
        produced += produce(bootstrap, [topic], 300, admin=admin)
        time.sleep(0.5)
    return produced


def one_run(index: int, load_s: float, secure: bool = False) -> tuple[float, float]:
    kind = "secured" if secure else "plaintext"
    run_dir = Path(tempfile.mkdtemp(prefix=f"mirrorbook-bench-start-{index}-"))
    stack = DevStack(run_dir)
    print(f"run {index} ({kind}): load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"on {os.cpu_count()} cores; run dir {run_dir}", flush=True)
    sampler = RssSampler(stack)
    sampler.start()
    try:
        started = start(stack, secure=secure)
        startup_peak = sampler.peak
        produced = small_load(stack, load_s)
    finally:
        peak = sampler.stop()
        stack.down(purge=True)
    print(f"run {index} ({kind}): all connectors and tasks RUNNING after {started:.1f} s; "
          f"peak RSS {startup_peak / MIB:.0f} MiB "
          f"during start, {peak / MIB:.0f} MiB including {load_s:.0f} s of load ({produced} records, "
          f"{sampler.samples} samples)", flush=True)
    return started, peak / MIB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--load-s", type=float, default=20.0, help="seconds of sampling under load after start")
    parser.add_argument("--secure", action="store_true",
                        help="also start the secured stack after the plaintext one in every run, and compare")
    args = parser.parse_args()
    t0 = time.monotonic()
    libs = artifacts.kafka_libs()  # fetched once; never part of the timing
    print(f"kafka jars: {libs} (ready in {time.monotonic() - t0:.1f} s, not timed)", flush=True)
    results, secured = [], []
    for i in range(args.runs):
        results.append(one_run(i + 1, args.load_s))
        if args.secure:
            secured.append(one_run(i + 1, args.load_s, secure=True))
    starts = [s for s, _ in results]
    peaks = [p for _, p in results]
    print(f"start times: {', '.join(f'{s:.1f}' for s in starts)} s; "
          f"peak RSS: {', '.join(f'{p:.0f}' for p in peaks)} MiB")
    print("targets on 2 cores: start < 90 s, RSS < 3072 MiB")
    print(f"RESULT devstack_start_s={statistics.median(starts):.1f} s")
    print(f"RESULT devstack_rss_mib={statistics.median(peaks):.0f} MiB")
    if secured:
        s_starts, s_peaks = [s for s, _ in secured], [p for _, p in secured]
        print(f"secured start times: {', '.join(f'{s:.1f}' for s in s_starts)} s; peak RSS: "
              f"{', '.join(f'{p:.0f}' for p in s_peaks)} MiB; target: secured start <= 2x plaintext")
        print(f"RESULT devstack_start_secure_s={statistics.median(s_starts):.1f} s")
        print(f"RESULT devstack_rss_secure_mib={statistics.median(s_peaks):.0f} MiB")
        print(f"RESULT secure_start_ratio={statistics.median(s_starts) / statistics.median(starts):.2f}")


if __name__ == "__main__":
    main()
