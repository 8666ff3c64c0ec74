"""Connector offsets runbook steps (Strimzi proposal 083): list — an audit snapshot plus Strimzi's JSON
artifact. The changes (alter, reset, restore) are the replication backend's (`change_own_offsets`; for
MM2 on Connect, replication/mm2_connect_offsets.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from mirrorbook.connect.models import ConnectorOffsets
from mirrorbook.replication.mm2_connect_offsets import SNAPSHOT_KIND
from mirrorbook.core.engine import Runbook, StepOutcome
from mirrorbook.runbooks.files import artifacts_dir
from mirrorbook.topology import CONNECTOR_CLASSES, FlowSpec


def artifact_name(flow: FlowSpec, role: str) -> str:
    """Strimzi's naming: `east-kafka->west-kafka.MirrorSourceConnector` ->
    `east-kafka--west-kafka.MirrorSourceConnector.json`."""
    return f"{flow.source}--{flow.target}.{CONNECTOR_CLASSES[role]}.json"


def list_offsets(rb: Runbook, offsets_of: Callable[[str], ConnectorOffsets], flow: FlowSpec, role: str,
                 out_dir: Path | None = None) -> StepOutcome:
    """Read the offsets (`offsets_of(role)`: the replication backend's own offsets), keep them in the audit
    (as a snapshot) and as Strimzi's JSON artifact."""
    name = flow.connector(role)
    with rb.step("offsets.list", flow.name) as step:
        offsets = offsets_of(role).sorted()
        body = offsets.to_body()
        sid = rb.audit.save_snapshot(SNAPSHOT_KIND, flow.name, name, {"connector": name, "role": role, **body},
                                     run_id=rb.info.run_id, note="listed")
        step.outcome.snapshot_id = sid
        path = (out_dir or artifacts_dir()) / artifact_name(flow, role)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(body, indent=2) + "\n")
        rb.audit.record_artifact("connector-offsets", rb.info.run_id, str(path),
                                 {"connector": name, "partitions": len(offsets.offsets), "snapshot_id": sid})
        step.note(connector=name, partitions=len(offsets.offsets), artifact=str(path))
        step.settle({"partitions": len(offsets.offsets)})
    return step.outcome
