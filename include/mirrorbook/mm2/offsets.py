"""Client-side validation of KIP-875 offset payloads for the three MM2 connectors.

Connect only validates MM2 offsets inside the connector, and reports a bad payload as a 500; we
check the same rules (Kafka's MirrorUtils) before any request, with messages at least as clear, plus
flow-aware checks Connect cannot make (the cluster aliases must be this flow's).
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from pydantic import ValidationError

from mirrorbook.bounds import OFFSETS_LIMITS, cut, loads, shown, unknown_keys
from mirrorbook.connect.models import ConnectorOffsets, OffsetEntry
from mirrorbook.errors import Refused
from mirrorbook.topology import CONNECTOR_CLASSES, FlowSpec

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

# role -> (string keys, has integer `partition`, offset must be exactly 0)
_RULES: dict[str, tuple[tuple[str, ...], bool, bool]] = {
    "source": (("cluster", "topic"), True, False),
    "checkpoint": (("group", "topic"), True, True),
    "heartbeat": (("sourceClusterAlias", "targetClusterAlias"), False, True),
}


class InvalidOffsets(Refused):
    pass


def _key(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True)


def _show(obj: Any) -> str:
    """A value from the body as messages echo it: JSON, bounded (a body may hold 1,000-character keys)."""
    return cut(_key(obj))


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_partition(role: str, partition: Mapping[str, Any]) -> None:
    strings, has_partition, _ = _RULES[role]
    expected = set(strings) | ({"partition"} if has_partition else set())
    for key in (*strings, *(("partition",) if has_partition else ())):
        if key not in partition:
            raise InvalidOffsets(f"Source partition {_show(partition)} is missing the '{key}' key, which is required "
                                 f"for {CONNECTOR_CLASSES[role]} (keys: {', '.join(sorted(expected))})")
    for key in strings:
        if not isinstance(partition[key], str) or not partition[key]:
            raise InvalidOffsets(f"Source partition {_show(partition)} has an invalid value {_show(partition[key])} "
                                 f"for the '{key}' key, which must be a non-empty string")
    if has_partition:
        v = partition["partition"]
        if not _is_int(v) or not 0 <= v <= INT32_MAX:
            raise InvalidOffsets(f"Source partition {_show(partition)} has an invalid value {_show(v)} for the "
                                 f"'partition' key, which must be an integer between 0 and {INT32_MAX}")
    unknown = set(partition) - expected
    if unknown:
        raise InvalidOffsets(f"Source partition {_show(partition)} has unexpected key(s) {shown(sorted(unknown))}; "
                             f"{CONNECTOR_CLASSES[role]} partitions have exactly: {', '.join(sorted(expected))}")


def _check_offset(role: str, partition: Mapping[str, Any], offset: Mapping[str, Any] | None) -> None:
    if offset is None:
        return  # null = reset this partition
    only_zero = _RULES[role][2]
    if "offset" not in offset:
        raise InvalidOffsets(f"Source offset {_show(offset)} for source partition {_show(partition)} is missing "
                             f"the 'offset' key, which is required")
    v = offset["offset"]
    where = f"Source offset {_show(offset)} for source partition {_show(partition)} has an invalid value {_show(v)}"
    if not _is_int(v):
        raise InvalidOffsets(f"{where} for the 'offset' key, which must be an integer")
    if only_zero and v != 0:
        raise InvalidOffsets(f"{where} for the 'offset' key; the only accepted value for "
                             f"{CONNECTOR_CLASSES[role]} is 0")
    if v < 0:
        raise InvalidOffsets(f"{where} for the 'offset' key, which cannot be negative (use null to reset a partition)")
    if v > INT64_MAX:
        raise InvalidOffsets(f"{where} for the 'offset' key, which exceeds a 64-bit offset")
    unknown = set(offset) - {"offset"}
    if unknown:
        raise InvalidOffsets(f"Source offset {_show(offset)} has unexpected key(s) {shown(sorted(unknown))}")


def _check_flow(role: str, partition: Mapping[str, Any], flow: FlowSpec) -> None:
    if role == "source" and partition["cluster"] != flow.source:
        raise InvalidOffsets(f"Source partition {_show(partition)} names cluster {shown(partition['cluster'])}, "
                             f"but flow {flow.name} replicates from {flow.source!r}")
    if role == "heartbeat" and (partition["sourceClusterAlias"], partition["targetClusterAlias"]) != (
            flow.source, flow.target):
        raise InvalidOffsets(f"Source partition {_show(partition)} does not belong to flow {flow.name} "
                             f"(expected sourceClusterAlias={flow.source!r}, targetClusterAlias={flow.target!r})")


EXPECTED = 'expected {"offsets": [{"partition": {...}, "offset": {"offset": N}}]}'
BODY_KEYS = tuple(ConnectorOffsets.model_fields)  # ("offsets",)
ENTRY_KEYS = tuple(OffsetEntry.model_fields)      # ("partition", "offset")


def parse_offsets(payload: str | Mapping[str, Any] | ConnectorOffsets, name: str = "offsets") -> ConnectorOffsets:
    """Parse a KIP-875 body (`{"offsets": [{"partition": {...}, "offset": {...} | null}]}`). Text is parsed
    within OFFSETS_LIMITS (`name` is what a refusal calls it); a key the format does not have is refused,
    naming the closest one it has."""
    if isinstance(payload, ConnectorOffsets):
        return payload
    if isinstance(payload, str):
        try:
            payload = loads(name, payload, OFFSETS_LIMITS)
        except json.JSONDecodeError as exc:
            raise InvalidOffsets(f"Offsets are not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
                                 EXPECTED)
    if not isinstance(payload, Mapping):
        raise InvalidOffsets("Offsets must be a JSON object with an 'offsets' list (KIP-875 format)", EXPECTED)
    unknown = unknown_keys(payload.keys(), BODY_KEYS, "key")
    if unknown is None and isinstance(payload.get("offsets"), list):
        unknown = next((f"entry {i}: {u}" for i, e in enumerate(payload["offsets"]) if isinstance(e, Mapping)
                        and (u := unknown_keys(e.keys(), ENTRY_KEYS, "key"))), None)
    if unknown:
        raise InvalidOffsets(f"In the offsets body, {unknown}", EXPECTED)
    if "offsets" not in payload:
        raise InvalidOffsets("Offsets must be a JSON object with an 'offsets' list (KIP-875 format)", EXPECTED)
    try:
        parsed = ConnectorOffsets.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = cut(".".join(str(p) for p in first["loc"]))
        raise InvalidOffsets(f"Offsets are malformed at '{loc}': {first['msg']}",
                             'each entry needs "partition" (object) and "offset" (object or null)')
    if not parsed.offsets:
        raise InvalidOffsets("The 'offsets' list is empty; there is nothing to alter",
                             "to reset every partition use the reset action instead")
    return parsed


def validate_offsets(role: str, payload: str | Mapping[str, Any] | ConnectorOffsets,
                     flow: FlowSpec | None = None) -> ConnectorOffsets:
    """Parse and validate an alter-offsets body for the flow's `role` connector; raise `InvalidOffsets`."""
    if role not in _RULES:
        raise InvalidOffsets(f"Unknown connector role {role!r}; expected one of {', '.join(_RULES)}")
    parsed = parse_offsets(payload)
    seen: set[str] = set()
    for entry in parsed.offsets:
        _check_partition(role, entry.partition)
        _check_offset(role, entry.partition, entry.offset)
        if flow is not None:
            _check_flow(role, entry.partition, flow)
        key = _key(entry.partition)
        if key in seen:
            raise InvalidOffsets(f"Source partition {_show(entry.partition)} appears more than once")
        seen.add(key)
    return parsed
