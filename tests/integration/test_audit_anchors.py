"""The audit chain against anchors on real Kafka: a cut tail with a rewound head passes the chain check
(a hash chain cannot see it) and fails `mirrorbook audit verify --anchors` with the missing range."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from mirrorbook.audit import AuditStore
from mirrorbook.runbooks.anchors import TOPIC, read_anchors, write_anchor
from mirrorbook.cli import main
from mirrorbook.clients import Clients, TopologyResolver
from mirrorbook.topology import KafkaClusterSpec, Topology

pytestmark = pytest.mark.integration


def _record(store: AuditStore, n: int, run_id: str) -> None:
    for i in range(n):
        store.record(run_id=run_id, action=f"step.test.{i}", kind="step", mutating=False, result="ok")


def _truncate(url: str, keep: int) -> None:
    """What a writer hiding its last events does: delete the tail rows and rewind the head row to match."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text("DELETE FROM audit_events WHERE seq > :keep"), {"keep": keep})
            last = conn.execute(text("SELECT hash FROM audit_events WHERE seq = :keep"), {"keep": keep}).scalar_one()
            conn.execute(text("UPDATE audit_head SET count = :keep, hash = :hash"), {"keep": keep, "hash": last})
    finally:
        engine.dispose()


def test_a_cut_tail_fails_verify_with_anchors_and_an_intact_one_passes(topology: Topology, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    store = AuditStore(url)
    topo = topology.model_copy(deep=True)
    topo.clusters["C"] = KafkaClusterSpec(connection_id="nowhere", bootstrap_servers="localhost:1")  # never up
    path = tmp_path / "topology.yaml"
    path.write_text(topo.to_yaml())
    clients = Clients(TopologyResolver(topo))

    _record(store, 5, "run-1")
    first = write_anchor(store, clients, ["A", "B", "C"], "run-1")
    assert first["anchor"]["seq"] == 5 and first["anchor"]["run_id"] == "run-1"
    assert first["clusters"] == {"A": f"anchored in {TOPIC}", "B": f"anchored in {TOPIC}",
                                 "C": "unreachable: not anchored there"}
    _record(store, 3, "run-2")
    write_anchor(store, clients, ["A", "B"], "run-2")
    head = store.head()
    assert head is not None and head.seq == 8
    # The witness: a compacted topic, keyed by the store's identity, holding no URL or secret.
    assert clients.admin("B").topic_configs([TOPIC])[TOPIC]["cleanup.policy"] == "compact"
    on_b = read_anchors(clients, "B", head.store)
    assert [(a.seq, a.hash, a.run_id) for a in on_b] == [(5, store.hash_at(5), "run-1"), (8, head.hash, "run-2")]
    assert str(tmp_path) not in first["anchor"].values()

    capsys.readouterr()
    assert main(["audit", "verify", "--url", url, "--anchors", "--topology", str(path)]) == 0
    out = capsys.readouterr().out
    assert "anchors OK: the store reaches seq 8 and matches its newest anchor, seq 8" in out
    assert "C: unreachable" in out and "A: 2 anchor(s), newest seq 8" in out  # said, not fatal

    _truncate(url, keep=6)
    assert store.verify().ok  # the chain alone cannot see a cut tail with a rewound head
    assert main(["audit", "verify", "--url", url, "--anchors", "A,C", "--topology", str(path)]) == 1
    err = capsys.readouterr().err
    assert "the store ends at seq 6" in err and "events 7..8 are missing (tail truncated)" in err, err
    assert main(["audit", "verify", "--url", url, "--anchors", "--topology", str(path), "--json"]) == 1
    assert '"missing": [\n      7,\n      8\n    ]' in capsys.readouterr().out
    # Without --anchors, verify is the store-only check it always was.
    assert main(["audit", "verify", "--url", url]) == 0
    assert main(["audit", "verify", "--url", url, "--anchors", "Z", "--topology", str(path)]) == 2
    store.close()
