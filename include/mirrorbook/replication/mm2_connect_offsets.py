"""MirrorMaker 2 on Connect: the replication's own offsets — a connector's KIP-875 offsets — altered, reset
or restored with Strimzi proposal 083 semantics.

Changes require a STOPPED connector (KIP-875). With `stop_first` the step does:
snapshot -> stop -> wait STOPPED -> change -> read back while STOPPED -> restore the previous state.
Without it, a connector that is not STOPPED is refused before any call. A change whose result is
already in place is not sent at all, so re-running a finished runbook changes nothing. The steps run in
the caller's runbook (`rb`, passed in), each call audited with what it leaves in place.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from mirrorbook.connect.client import ConnectClient, Endpoints
from mirrorbook.connect.models import ConnectorOffsets, OffsetEntry
from mirrorbook.connect.wait import reached, wait_for
from mirrorbook.errors import GateRefused, Verdict
from mirrorbook.replication.connect_calls import mutate_connect
from mirrorbook.replication.backend import TARGET_ACTION, ReadBack
from mirrorbook.replication.expect import ConnectorOffsetsAre, ConnectorState
from mirrorbook.replication.mm2_connect_states import connector_state
from mirrorbook.topology import FlowSpec

if TYPE_CHECKING:
    from mirrorbook.core.engine import Runbook, StepOutcome

SNAPSHOT_KIND = "connector-offsets"
RESET = "reset"


class OffsetsVerifyFailed(Verdict):
    pass


def _key(partition: dict[str, Any]) -> str:
    return json.dumps(partition, sort_keys=True)


def _index(offsets: ConnectorOffsets) -> dict[str, OffsetEntry]:
    return {_key(e.partition): e for e in offsets.offsets}


def plan_change(action: str, current: ConnectorOffsets, requested: ConnectorOffsets | None = None,
                snapshot: ConnectorOffsets | None = None) -> ConnectorOffsets | str | None:
    """What to send: a PATCH body, RESET (DELETE), or None when the result is already in place."""
    now = _index(current)
    if action == "reset":
        return RESET if now else None
    if action == "alter":
        assert requested is not None
        diff = [e for e in requested.offsets
                if (now[_key(e.partition)].offset if _key(e.partition) in now else None) != e.offset]
        return ConnectorOffsets(offsets=diff) if diff else None
    if action == "restore":
        assert snapshot is not None
        want = _index(snapshot)
        if not want:
            return RESET if now else None
        diff = [e for k, e in want.items() if k not in now or now[k].offset != e.offset]
        diff += [OffsetEntry(partition=e.partition, offset=None) for k, e in now.items() if k not in want]
        return ConnectorOffsets(offsets=diff) if diff else None
    raise ValueError(f"unknown offsets action {action!r}")


def _expected_after(action: str, current: ConnectorOffsets, change: ConnectorOffsets | str,
                    snapshot: ConnectorOffsets | None) -> dict[str, Any]:
    if not isinstance(change, ConnectorOffsets):  # RESET
        return {}
    if action == "restore":
        assert snapshot is not None
        return snapshot.by_partition()
    after = current.by_partition()
    for e in change.offsets:
        if e.offset is None:
            after.pop(_key(e.partition), None)
        else:
            after[_key(e.partition)] = e.offset
    return after


def load_snapshot_offsets(rb: "Runbook", snapshot_id: str, connector: str) -> ConnectorOffsets:
    snap = rb.audit.snapshot(snapshot_id)
    if snap.kind != SNAPSHOT_KIND or snap.subject != connector:
        raise GateRefused(f"Snapshot {snapshot_id} holds {snap.kind} of {snap.subject!r}, not the offsets of "
                          f"connector {connector!r}", "pick a snapshot of this connector: mirrorbook audit snapshots")
    return ConnectorOffsets(offsets=snap.payload.get("offsets", []))


def state_before_stop_key(name: str) -> str:
    """The run's progress key of the state `stop_first` found the connector in (restored after the change)."""
    return f"offsets.{name}.state_before_stop"


def change_offsets(rb: "Runbook", client: ConnectClient, flow: FlowSpec, role: str, action: str, *,
                   requested: ConnectorOffsets | None = None, snapshot_id: str | None = None,
                   stop_first: bool = False, timeout_s: float = 120.0, effect: str | None = None,
                   on_read_back: ReadBack | None = None) -> "StepOutcome":
    """`effect`: what the change does to replication, stated in the plan and the audit beside each call;
    `on_read_back(name, expected, found)`: called with the offsets read back while the connector is STOPPED."""
    name = flow.connector(role)
    resume_key = state_before_stop_key(name)
    with rb.step(f"offsets.{action}", flow.name) as step:
        status = client.status(name)
        current = client.get_offsets(name)
        snapshot = None
        if action == "restore":
            assert snapshot_id is not None, "OffsetsParams requires a snapshot_id for restore"
            snapshot = load_snapshot_offsets(rb, snapshot_id, name)
        step.observe({**connector_state(status), "partitions": len(current.offsets)})
        step.note(connector=name, role=role, stop_first=stop_first, restore_from=snapshot_id, effect=effect)
        change = plan_change(action, current, requested, snapshot)
        # A retry of this run may find the connector stopped by its previous attempt: honour the state it had.
        previous = rb.progress_get(resume_key) or status.connector.state
        stopped = reached(status, "STOPPED")
        state_now = status.connector.state  # as planned, in a dry run
        if change is not None and not stopped:
            if not stop_first:
                raise GateRefused(
                    f"Connector {name} is {status.connector.state}: it must be STOPPED before its offsets can be "
                    f"changed (KIP-875). Nothing was changed.",
                    "stop the flow first (mm2_pause_resume action=stop), or re-run with stop_first=true")
            rb.progress_set(resume_key, previous)
            mutate_connect(step, client, Endpoints.stop(name), action="connector.stop",
                           expect=ConnectorState(connector=name, state="STOPPED"),
                           precondition=f"{name} is {status.summary()}; offsets change needs STOPPED (stop_first)")
            state_now = "STOPPED"
            if not rb.dry_run:
                wait_for(client, name, "STOPPED", timeout_s=timeout_s)
                # A running connector moved its offsets until it stopped: decide on what is there now.
                current = client.get_offsets(name)
                change = plan_change(action, current, requested, snapshot)
        if change is None:
            step.note(reason="offsets already as requested")
        else:
            # Snapshot exactly what is about to be overwritten: the STOPPED connector's offsets.
            step.snapshot(SNAPSHOT_KIND, name, {"connector": name, "role": role, "state": status.connector.state,
                                                **current.sorted().to_body()}, note=f"before offsets.{action}")
            precondition = (f"{name} is STOPPED" if stopped or not rb.dry_run else
                            f"{name} will be STOPPED by the previous call")
            if effect:
                precondition += f"; effect on replication: {effect}"
            call = (Endpoints.alter_offsets(name, change) if isinstance(change, ConnectorOffsets) else
                    Endpoints.reset_offsets(name))  # RESET
            expected = _expected_after(action, current, change, snapshot)
            mutate_connect(step, client, call, action="offsets.reset" if change == RESET else f"offsets.{action}",
                           precondition=precondition, expect=ConnectorOffsetsAre(connector=name, offsets=expected))
            if not rb.dry_run:
                found = _verify(client, name, expected)
                if on_read_back is not None:
                    on_read_back(name, expected, found)
        _restore_state(rb, step, client, name, previous, state_now, timeout_s)
        rb.progress_set(resume_key, None)
        step.settle(connector_state(client.status(name)) if not rb.dry_run else
                    ({"planned": True} if change is not None else step.outcome.before))
    return step.outcome


def _verify(client: ConnectClient, name: str, expected: dict[str, Any]) -> dict[str, Any]:
    """Read the offsets back while the connector is still STOPPED (a running one moves them at once)."""
    got = client.get_offsets(name).by_partition()
    if got != expected:
        missing = {k: v for k, v in expected.items() if got.get(k) != v}
        extra = {k: v for k, v in got.items() if k not in expected}
        raise OffsetsVerifyFailed(f"Offsets of {name} read back differ from what was written: "
                                  f"expected-but-not-found={missing}, unexpected={extra}")
    return got


def _restore_state(rb: "Runbook", step: Any, client: ConnectClient, name: str, previous: str, now: str,
                   timeout_s: float) -> None:
    """Put the connector back in the state it had before `stop_first` stopped it."""
    if previous in ("STOPPED", now) or previous not in TARGET_ACTION:
        return
    call = Endpoints.resume(name) if previous == "RUNNING" else Endpoints.pause(name)
    mutate_connect(step, client, call, action=f"connector.{TARGET_ACTION[previous]}",
                   expect=ConnectorState(connector=name, state=previous),
                   precondition=f"{name} was {previous} before stop_first stopped it")
    if not rb.dry_run:
        wait_for(client, name, previous, timeout_s=timeout_s)
