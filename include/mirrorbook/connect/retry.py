"""Exponential backoff with an overall deadline, shared by the sync and async clients."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Iterator


@dataclass(frozen=True)
class RetryPolicy:
    """`deadline_s` bounds the whole call including retries; `initial_s` doubles up to `max_backoff_s`."""

    deadline_s: float = 30.0
    initial_s: float = 0.25
    max_backoff_s: float = 4.0
    multiplier: float = 2.0
    jitter: float = 0.1

    def delays(self) -> Iterator[float]:
        """Yield the sleep before each retry until the deadline would be passed; then stop."""
        start = time.monotonic()
        delay = self.initial_s
        while True:
            sleep = min(delay, self.max_backoff_s) * (1 + random.uniform(-self.jitter, self.jitter))
            remaining = self.deadline_s - (time.monotonic() - start)
            if remaining <= 0:
                return
            yield min(sleep, remaining)
            delay *= self.multiplier


NO_RETRY = RetryPolicy(deadline_s=0.0)
