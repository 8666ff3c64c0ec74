"""Write-ahead auditing, the runbook side: what each mutating call leaves in place (an `Expect`, recorded with
its intent before the call), and the reconciliation of calls whose outcome nobody recorded.

A task killed between a call reaching Kafka or Connect and its outcome event leaves an open intent. The
next attempt of that task — or the next run that holds the flow's lock, once the dead run lost it — checks
each one against the real state and records what it found (applied / not applied) before it does anything
else: so every change made appears on the trail, exactly once, and a re-run that finds the change in place
(and therefore makes no call) does not leave it unrecorded.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from mirrorbook.audit.models import AuditEvent, OpenIntent, RequestSummary
from mirrorbook.bounds import shown
from mirrorbook.clients import Clients
from mirrorbook.connect.client import Call
from mirrorbook.errors import MirrorbookError
from mirrorbook.kafka.types import TP
from mirrorbook.topology import FlowSpec

if TYPE_CHECKING:  # the engine records intents with these expectations: it imports this module
    from mirrorbook.runbooks.engine import Runbook

log = logging.getLogger(__name__)


class _Expect(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def check(self, clients: Clients, flow: FlowSpec | None) -> tuple[bool, str]:
        """(whether it is in place, what was found) — read from the cluster itself."""
        raise NotImplementedError


class GroupOffsets(_Expect):
    """Committed offsets of consumer groups on a Kafka cluster: [topic, partition, offset] per group."""

    kind: Literal["group-offsets"] = "group-offsets"
    cluster: str
    groups: dict[str, list[tuple[str, int, int]]]

    @classmethod
    def of(cls, cluster: str, offsets: dict[str, dict[TP, int]]) -> "GroupOffsets":
        return cls(cluster=cluster, groups={g: [(tp.topic, tp.partition, o) for tp, o in sorted(offs.items())]
                                            for g, offs in offsets.items()})

    def check(self, clients: Clients, flow: FlowSpec | None) -> tuple[bool, str]:
        got = clients.admin(self.cluster).committed_offsets(self.groups)
        wrong = [f"{g} {t}-{p}: {got.get(g, {}).get(TP(t, p), 'nothing')} (intended {o})"
                 for g, rows in self.groups.items() for t, p, o in rows if got.get(g, {}).get(TP(t, p)) != o]
        if not wrong:
            return True, f"committed offsets of {len(self.groups)} group(s) on {self.cluster} are as intended"
        return False, f"on {self.cluster}: " + "; ".join(wrong[:5]) + (f" (+{len(wrong) - 5} more)" if len(wrong) > 5 else "")


class GroupsAbsent(_Expect):
    kind: Literal["groups-absent"] = "groups-absent"
    cluster: str
    groups: list[str]

    def check(self, clients: Clients, flow: FlowSpec | None) -> tuple[bool, str]:
        left = sorted(set(self.groups) & set(clients.admin(self.cluster).list_groups()))
        return (not left, f"groups still on {self.cluster}: {left}" if left else f"groups gone from {self.cluster}")


class TopicsExist(_Expect):
    kind: Literal["topics-exist"] = "topics-exist"
    cluster: str
    topics: list[str]

    def check(self, clients: Clients, flow: FlowSpec | None) -> tuple[bool, str]:
        missing = sorted(set(self.topics) - set(clients.admin(self.cluster).topics()))
        return (not missing, f"topics missing on {self.cluster}: {missing}" if missing
                else f"topics exist on {self.cluster}")


class ConnectorState(_Expect):
    """The state a pause/resume/stop/restart call asks the connector (of the intent's flow) to reach."""

    kind: Literal["connector-state"] = "connector-state"
    connector: str
    state: str

    def check(self, clients: Clients, flow: FlowSpec | None) -> tuple[bool, str]:
        if flow is None:
            raise MirrorbookError(f"the intent on connector {shown(self.connector)} names no flow to reach it by")
        with clients.connect(flow) as client:
            now = client.status(self.connector).connector.state
        return now == self.state, f"{self.connector} is {now} (intended {self.state})"


class ConnectorOffsetsAre(_Expect):
    """The offsets a STOPPED connector holds after an alter/reset: source partition (as JSON) -> offset."""

    kind: Literal["connector-offsets"] = "connector-offsets"
    connector: str
    offsets: dict[str, Any]

    def check(self, clients: Clients, flow: FlowSpec | None) -> tuple[bool, str]:
        if flow is None:
            raise MirrorbookError(f"the intent on connector {shown(self.connector)} names no flow to reach it by")
        with clients.connect(flow) as client:
            now = client.get_offsets(self.connector).by_partition()
        differ = sorted(k for k in set(now) | set(self.offsets) if now.get(k) != self.offsets.get(k))
        return not differ, (f"offsets of {self.connector} are as intended" if not differ else
                            f"offsets of {self.connector} differ at {len(differ)} partition(s), e.g. {differ[:3]}")


Expect = Annotated[Union[GroupOffsets, GroupsAbsent, TopicsExist, ConnectorState, ConnectorOffsetsAre],
                   Field(discriminator="kind")]
_EXPECT: TypeAdapter[Any] = TypeAdapter(Expect)

# The state each connector-state endpoint asks for (restart: back to RUNNING).
_CALL_STATE = {"pause": "PAUSED", "resume": "RUNNING", "stop": "STOPPED", "restart": "RUNNING"}


def of_call(call: Call[Any]) -> ConnectorState | None:
    """The expectation of a connector-state call (pause/resume/stop/restart), from its endpoint; else None."""
    state = _CALL_STATE.get(call.what)
    return ConnectorState(connector=call.connector, state=state) if state and call.connector else None


def reconcile(rb: Runbook, clients: Clients, flows: list[FlowSpec], *, held: bool) -> list[dict[str, Any]]:
    """Check every open intent this task may settle, record what was found, close it; returns the findings.

    Always: intents of this very task of this run (its earlier attempt died). With `held` (the caller now
    holds the locks of `flows`): also any other run's on those flows — their runs no longer hold the
    lock, so nobody else will ever record those outcomes. An intent that cannot be checked now (its
    cluster unreachable) stays open for the next attempt, and is named in the step.
    """
    names = sorted({f.name for f in flows})
    by_name = {f.name: f for f in flows}
    found = rb.audit.open_intents(rb.info.run_id, rb.info.task_id, names if held else None)
    found = [i for i in found if i.run_id != rb.info.run_id or i.task_id == rb.info.task_id]
    if not found or rb.dry_run:
        return []
    findings: list[dict[str, Any]] = []
    with rb.step("intents.reconcile", found[0].flow) as step:
        for intent in found:
            findings.append(_settle(rb, clients, by_name.get(intent.flow or ""), intent))
        step.note(intents=findings)
        step.settle({"applied": sum(f["found"] == "applied" for f in findings),
                     "not_applied": sum(f["found"] == "not applied" for f in findings),
                     "unchecked": sum(f["found"] == "unchecked" for f in findings)})
    return findings


def _settle(rb: Runbook, clients: Clients, flow: FlowSpec | None, intent: OpenIntent) -> dict[str, Any]:
    expect = _EXPECT.validate_python(intent.expect)
    base = {"intent": intent.event_id, "action": intent.action, "of_run": intent.run_id, "of_task": intent.task_id}
    try:
        applied, what = expect.check(clients, flow)
    except Exception as exc:  # unreachable now: leave it open, say so, and go on (the run's own steps decide)
        log.warning("intent %s (%s of run %s) could not be checked: %s", intent.event_id, intent.action,
                    intent.run_id, exc)
        return {**base, "found": "unchecked", "why": f"{type(exc).__name__}: {exc}"}
    original = rb.audit.get(intent.event_id)
    rb.audit.close_intent(intent.event_id, AuditEvent(
        action=intent.action, kind="call", result="ok" if applied else "noop", mutating=True, flow=intent.flow,
        run_id=rb.info.run_id, dag_id=rb.info.dag_id, task_id=rb.info.task_id, user=rb.info.user,
        request=RequestSummary.model_validate(original.request.model_dump()) if original.request else None,
        snapshot_id=original.snapshot_id,
        details={"reconciled": "applied" if applied else "not applied", "found": what,
                 "of_run": intent.run_id, "of_task": intent.task_id,
                 "precondition": original.details.get("precondition")}))
    return {**base, "found": "applied" if applied else "not applied", "what": what}
