"""Client-side validation of MM2 offset payloads: rejected before any request, with precise wording."""

from __future__ import annotations

import pytest

from mirrorbook.mm2.offsets import InvalidOffsets, validate_offsets
from mirrorbook.topology import FlowSpec

FLOW = FlowSpec(source="A", target="B", connect_cluster="B")


def body(partition, offset):
    return {"offsets": [{"partition": partition, "offset": offset}]}


SRC = {"cluster": "A", "topic": "orders", "partition": 0}
CP = {"group": "g1", "topic": "A.orders", "partition": 3}
HB = {"sourceClusterAlias": "A", "targetClusterAlias": "B"}


@pytest.mark.parametrize("role,partition,offset", [
    ("source", SRC, {"offset": 41}),
    ("source", SRC, None),  # null = reset that partition
    ("source", SRC, {"offset": 0}),
    ("checkpoint", CP, {"offset": 0}),
    ("heartbeat", HB, {"offset": 0}),
])
def test_valid_payloads_pass(role, partition, offset):
    parsed = validate_offsets(role, body(partition, offset), FLOW)
    assert parsed.offsets[0].partition == partition and parsed.offsets[0].offset == offset


@pytest.mark.parametrize("role,payload,needle", [
    ("source", "{not json", "not valid JSON"),
    ("source", {"offset": []}, "unknown key 'offset' — did you mean 'offsets'?"),
    ("source", {}, "'offsets' list"),
    ("source", {"offsets": [{"partition": SRC, "offst": {"offset": 1}}]},
     "entry 0: unknown key 'offst' — did you mean 'offset'?"),
    ("source", {"offsets": []}, "is empty"),
    ("source", {"offsets": [{"partition": SRC}]}, "malformed at 'offsets.0.offset'"),
    ("source", body({"topic": "orders", "partition": 0}, {"offset": 1}), "missing the 'cluster' key"),
    ("source", body({**SRC, "partition": "0"}, {"offset": 1}), "'partition' key, which must be an integer"),
    ("source", body({**SRC, "partition": True}, {"offset": 1}), "'partition' key, which must be an integer"),
    ("source", body({**SRC, "extra": 1}, {"offset": 1}), "unexpected key(s) ['extra']"),
    ("source", body(SRC, {"offset": -1}), "cannot be negative"),
    ("source", body(SRC, {"offset": 1.5}), "must be an integer"),
    ("source", body(SRC, {"offst": 1}), "missing the 'offset' key"),
    ("source", body({**SRC, "cluster": "C"}, {"offset": 1}), "flow A->B replicates from 'A'"),
    ("checkpoint", body(CP, {"offset": 5}), "the only accepted value for MirrorCheckpointConnector is 0"),
    ("checkpoint", body({"topic": "A.orders", "partition": 0}, {"offset": 0}), "missing the 'group' key"),
    ("heartbeat", body(HB, {"offset": 1}), "the only accepted value for MirrorHeartbeatConnector is 0"),
    ("heartbeat", body({**HB, "targetClusterAlias": "C"}, {"offset": 0}), "does not belong to flow A->B"),
    ("source", {"offsets": [{"partition": SRC, "offset": {"offset": 1}}] * 2}, "appears more than once"),
    ("sink", body(SRC, {"offset": 1}), "Unknown connector role"),
])
def test_bad_payloads_rejected_with_precise_message(role, payload, needle):
    with pytest.raises(InvalidOffsets) as err:
        validate_offsets(role, payload, FLOW)
    assert needle in str(err.value)
