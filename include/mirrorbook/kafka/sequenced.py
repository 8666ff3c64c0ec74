"""Sequence-numbered records: what the devstack's workload and the DR drill's canary produce, so that a consumer
can prove it skipped or re-read nothing. A record of partition p of topic t carries `seq` (its offset on the cluster
it was produced to) in its JSON value and in a header, and who produced it (`origin`)."""

from __future__ import annotations

import json

SEQ_HEADER = "mirrorbook-seq"
ORIGIN_HEADER = "mirrorbook-origin"


def record(topic: str, partition: int, seq: int, origin: str, pad: int = 0) -> tuple[bytes, bytes, list]:
    key = f"{topic}/{partition}/k{seq % 97}".encode()
    value = json.dumps({"topic": topic, "partition": partition, "seq": seq, "origin": origin,
                        "pad": "x" * pad}).encode()
    headers = [(SEQ_HEADER, str(seq).encode()), (ORIGIN_HEADER, origin.encode())]
    return key, value, headers
