"""What the replication backend's mutating calls leave in place, checked through the backend.

The write-ahead audit records one of these with every intent (runbooks/intents.py reads them back and
checks the calls nobody recorded an outcome for). The `kind` values and field names are stored in the audit
trail: they stay as they are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from mirrorbook.core.expect import Expectation
from mirrorbook.bounds import shown
from mirrorbook.errors import MirrorbookError
from mirrorbook.replication import backend_for

if TYPE_CHECKING:
    from mirrorbook.clients import Clients
    from mirrorbook.topology import FlowSpec


def _part(flow: "FlowSpec | None", name: str) -> tuple["FlowSpec", str]:
    """The intent's flow and the part of it that `name` is."""
    if flow is None:
        raise MirrorbookError(f"the intent on {shown(name)} names no flow to reach it by")
    role = flow.role_of(name)
    if role is None:
        raise MirrorbookError(f"{shown(name)} is not a part of flow {flow.name}")
    return flow, role


class ConnectorState(Expectation):
    """The state a pause/resume/stop/restart asks one part (a connector) of the intent's flow to reach."""

    kind: Literal["connector-state"] = "connector-state"
    connector: str
    state: str

    def check(self, clients: "Clients", flow: "FlowSpec | None") -> tuple[bool, str]:
        flow, role = _part(flow, self.connector)
        status = backend_for(clients, flow).part_states()[role]
        now = status.connector.state if status is not None else "absent"
        return now == self.state, f"{self.connector} is {now} (intended {self.state})"


class ConnectorOffsetsAre(Expectation):
    """The offsets a stopped part holds after an alter/reset: source partition (as JSON) -> offset."""

    kind: Literal["connector-offsets"] = "connector-offsets"
    connector: str
    offsets: dict[str, Any]

    def check(self, clients: "Clients", flow: "FlowSpec | None") -> tuple[bool, str]:
        flow, role = _part(flow, self.connector)
        now = backend_for(clients, flow).own_offsets(role).by_partition()
        differ = sorted(k for k in set(now) | set(self.offsets) if now.get(k) != self.offsets.get(k))
        return not differ, (f"offsets of {self.connector} are as intended" if not differ else
                            f"offsets of {self.connector} differ at {len(differ)} partition(s), e.g. {differ[:3]}")
