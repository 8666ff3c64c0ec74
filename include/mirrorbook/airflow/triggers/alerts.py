"""The trigger mm2_failover_on_alert waits with: each flow's episode lasting enough health checks, or ending."""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator

from airflow.triggers.base import BaseTrigger, TriggerEvent

from mirrorbook.airflow.triggers.kafka import poll
from mirrorbook.audit import AuditStore
from mirrorbook.errors import MirrorbookError
from mirrorbook.runbooks.alerts import Episode, sort_out


class FlowsDownTrigger(BaseTrigger):
    """Polls the health check's memory (audit store) until no episode is `waiting`, or the timeout passes."""

    def __init__(self, *, episodes: list[dict[str, Any]], checks: int, timeout_s: float, poll_s: float = 5.0) -> None:
        super().__init__()
        self.episodes, self.checks, self.timeout_s, self.poll_s = episodes, checks, timeout_s, poll_s

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"episodes": self.episodes, "checks": self.checks, "timeout_s": self.timeout_s, "poll_s": self.poll_s})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        deadline = time.monotonic() + self.timeout_s
        watching = [Episode.model_validate(e) for e in self.episodes]
        try:
            audit = AuditStore.from_env()

            async def check() -> tuple[bool, dict[str, Any]]:
                found = await asyncio.to_thread(sort_out, audit, watching, self.checks)
                return not found["waiting"], {k: [e.model_dump() for e in v] for k, v in found.items()}

            yield await poll(check, deadline, self.poll_s)
        except MirrorbookError as exc:
            yield TriggerEvent({"status": "error", "message": str(exc)})
