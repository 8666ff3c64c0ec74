"""What a mutating call leaves in place, checkable later against the real state: a write-ahead intent keeps it
(the audit store stores it as JSON), and a run that died between the call and its outcome is settled by checking it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:  # checked with the caller's clients; the engine only carries it
    from mirrorbook.clients import Clients
    from mirrorbook.topology import FlowSpec


class Expectation(BaseModel):
    """What a mutating call leaves in place (an intent's `expect`), checkable against the real state later.

    Kafka-side kinds live in runbooks/intents.py, the replication backend's in replication/expect.py; each
    has a `kind` literal, so one discriminated union reads them all back."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def check(self, clients: "Clients", flow: "FlowSpec | None") -> tuple[bool, str]:
        """(whether it is in place, what was found) — read from the cluster itself."""
        raise NotImplementedError
