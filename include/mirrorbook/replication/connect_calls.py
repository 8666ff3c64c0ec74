"""A Connect REST call made as a step's mutation: through `Step.mutate` like every other (dry-run plan, write-ahead
intent, audit event), described by the call's own method, path and body (`connect.client.Call`)."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel

from mirrorbook.connect.client import Call, ConnectClient
from mirrorbook.core.engine import Step

T = TypeVar("T")


def mutate_connect(step: Step, client: ConnectClient, call: Call[T], *, action: str, precondition: str,
                   expect: BaseModel) -> T | None:
    return step.mutate(action, lambda: client.run(call), method=call.method, path=call.path, body=call.body,
                       precondition=precondition, expect=expect)
