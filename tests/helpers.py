"""Test helpers: polling for an eventual condition, and reading what a consumer would see."""

from __future__ import annotations

import json
import time
from typing import Any, Callable, TypeVar

from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.reader import read_ranges
from mirrorbook.kafka.types import TP

T = TypeVar("T")


def eventually(fn: Callable[[], T], *, timeout: float = 60.0, interval: float = 0.5, what: str = "condition") -> T:
    """Call `fn` until it returns a truthy value (returned) or raises no AssertionError; fail at `timeout`."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            value = fn()
            if value:
                return value
            last = value
        except AssertionError as exc:
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")
        time.sleep(interval)


def wait_mirrored(admin_src: KafkaAdmin, admin_dst: KafkaAdmin, topic: str, remote: str,
                  timeout: float = 90.0) -> dict[TP, int]:
    """Wait until every partition of `remote` on the target has as many records as `topic` on the source."""
    tps = admin_src.partitions([topic])
    want = admin_src.high_watermarks(tps)

    def caught_up() -> dict[TP, int] | None:
        if remote not in admin_dst.topics():
            return None
        got = admin_dst.high_watermarks([TP(remote, tp.partition) for tp in tps])
        return got if all(got[TP(remote, tp.partition)] >= want[tp] for tp in tps) else None

    return eventually(caught_up, timeout=timeout, what=f"{topic} mirrored to {remote}")


def seqs(bootstrap: str, tp: TP, start: int, end: int) -> list[int]:
    """The workload sequence numbers a consumer positioned at `start` reads up to `end`."""
    return [json.loads(m.value())["seq"] for m in read_ranges(bootstrap, {tp: (start, end)})]
