"""Write-ahead auditing, the runbook side: what each mutating call leaves in place (an `Expect`, recorded with
its intent before the call), and the reconciliation of calls whose outcome nobody recorded. The Kafka-side
expectations are here; the replication backend's (a part's state, its own offsets) are in
replication/expect.py and are checked through the backend.

A task killed between a call reaching Kafka or Connect and its outcome event leaves an open intent. The
next attempt of that task — or the next run that holds the flow's lock, once the dead run lost it — checks
each one against the real state and records what it found (applied / not applied) before it does anything
else: so every change made appears on the trail, exactly once, and a re-run that finds the change in place
(and therefore makes no call) does not leave it unrecorded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import Field, TypeAdapter

from mirrorbook.audit.models import AuditEvent, OpenIntent, RequestSummary
from mirrorbook.core.expect import Expectation
from mirrorbook.clients import Clients
from mirrorbook.kafka.types import TP
from mirrorbook.redaction import get_logger
from mirrorbook.replication.expect import ConnectorOffsetsAre, ConnectorState
from mirrorbook.topology import FlowSpec

if TYPE_CHECKING:
    from mirrorbook.core.engine import Runbook

log = get_logger(__name__)


class GroupOffsets(Expectation):
    """Committed offsets of consumer groups on a Kafka cluster: per group, `topic:partition:offset` comma-separated
    (a Kafka topic name holds neither character). One text a group, not a list of triples: an intent is recorded
    for each group a failover writes, and the audit store gates every value it keeps — 150,000 triples took seconds
    of a thousand groups' cutover. An intent an older release kept lists [topic, partition, offset] triples."""

    kind: Literal["group-offsets"] = "group-offsets"
    cluster: str
    groups: dict[str, str | list[tuple[str, int, int]]]

    @classmethod
    def of(cls, cluster: str, offsets: dict[str, dict[TP, int]]) -> "GroupOffsets":
        return cls(cluster=cluster, groups={g: ",".join(f"{tp.topic}:{tp.partition}:{o}"
                                                        for tp, o in sorted(offs.items()))
                                            for g, offs in offsets.items()})

    def offsets(self, group: str) -> list[tuple[str, int, int]]:
        """(topic, partition, offset) of each partition of `group`."""
        kept = self.groups[group]
        if not isinstance(kept, str):
            return list(kept)
        return [(t, int(p), int(o)) for t, p, o in (item.rsplit(":", 2) for item in kept.split(",") if item)]

    def check(self, clients: Clients, flow: FlowSpec | None) -> tuple[bool, str]:
        got = clients.admin(self.cluster).committed_offsets(self.groups)
        wrong = [f"{g} {t}-{p}: {got.get(g, {}).get(TP(t, p), 'nothing')} (intended {o})"
                 for g in self.groups for t, p, o in self.offsets(g) if got.get(g, {}).get(TP(t, p)) != o]
        if not wrong:
            return True, f"committed offsets of {len(self.groups)} group(s) on {self.cluster} are as intended"
        more = f" (+{len(wrong) - 5} more)" if len(wrong) > 5 else ""
        return False, f"on {self.cluster}: " + "; ".join(wrong[:5]) + more


class GroupsAbsent(Expectation):
    kind: Literal["groups-absent"] = "groups-absent"
    cluster: str
    groups: list[str]

    def check(self, clients: Clients, flow: FlowSpec | None) -> tuple[bool, str]:
        left = sorted(set(self.groups) & set(clients.admin(self.cluster).list_groups()))
        return (not left, f"groups still on {self.cluster}: {left}" if left else f"groups gone from {self.cluster}")


class TopicsExist(Expectation):
    kind: Literal["topics-exist"] = "topics-exist"
    cluster: str
    topics: list[str]

    def check(self, clients: Clients, flow: FlowSpec | None) -> tuple[bool, str]:
        missing = sorted(set(self.topics) - set(clients.admin(self.cluster).topics()))
        return (not missing, f"topics missing on {self.cluster}: {missing}" if missing
                else f"topics exist on {self.cluster}")


Expect = Annotated[Union[GroupOffsets, GroupsAbsent, TopicsExist, ConnectorState, ConnectorOffsetsAre],
                   Field(discriminator="kind")]
_EXPECT: TypeAdapter[Any] = TypeAdapter(Expect)


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
