"""Anchors: the audit chain's head, witnessed outside the store it protects.

A hash chain proves that every event links to the one before it; it cannot see events cut from its end
when the head row is rewound with them. So when a run ends, the head (sequence, hash, time, run id) is
written to witnesses the store's writer cannot rewrite silently: the compacted topic
`mirrorbook.audit-anchors` on each reachable Kafka cluster of the run's flows (key: the store's
identity, the hash of its first event; value: JSON), and the run's task log. `mirrorbook audit verify
--anchors` then compares the store with the newest anchor it can read.

Writing an anchor is an audit-side write, not a runbook mutation: it changes nothing a runbook manages
(no connector, offset or group), and an audit event for it would move the very head it witnesses — so
it does not pass `Step.mutate`; the task log records it. An anchor carries hashes, sequence numbers, a
time and a run id only: never a URL, a connection or a secret. The store itself stays free of Kafka:
this module reads it through `AuditStore.head()`/`hash_at()` and reaches Kafka through `Clients`.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any, Callable, Iterable

from confluent_kafka import KafkaException, Producer
from pydantic import AwareDatetime, BaseModel, ConfigDict, ValidationError

from mirrorbook.audit.store import AuditStore
from mirrorbook.bounds import cut
from mirrorbook.clients import Clients
from mirrorbook.errors import MirrorbookError
from mirrorbook.kafka.config import client_config
from mirrorbook.kafka.reader import read_ranges

TOPIC = "mirrorbook.audit-anchors"
TOPIC_CONFIG = {"cleanup.policy": "compact"}
PING_S = 3.0  # a dead cluster costs the end of a run seconds, not a client default
FLUSH_S = 10.0
READ_S = 15.0
MAX_ANCHOR_BYTES = 4096  # an anchor is ~300 bytes: anything larger is not one of ours, and is not parsed


class Anchor(BaseModel):
    """One witnessed head: the store it belongs to, where its chain ended, when, after which run."""

    model_config = ConfigDict(extra="forbid")
    store: str
    seq: int
    hash: str
    at: AwareDatetime
    run_id: str | None = None

    def describe(self) -> str:
        return (f"seq {self.seq} (hash {self.hash[:12]}…, anchored {self.at.isoformat()} "
                f"after run {self.run_id or '-'})")


class AnchorCheck(BaseModel):
    """The store against its newest anchor: `missing` is the range of sequence numbers the store lost."""

    ok: bool
    reason: str
    anchor: Anchor | None = None
    missing: tuple[int, int] | None = None
    clusters: dict[str, str] = {}

    def summary(self) -> str:
        where = "; ".join(f"{c}: {s}" for c, s in sorted(self.clusters.items()))
        return f"anchors {'OK' if self.ok else 'BROKEN'}: {self.reason}" + (f" [{where}]" if where else "")


# -- the comparison (pure) -------------------------------------------------------------------------

def newest(anchors: Iterable[Anchor]) -> Anchor | None:
    """The anchor witnessing the longest chain (a store only grows: the highest sequence is the newest)."""
    return max(anchors, key=lambda a: (a.seq, a.at), default=None)


def compare(anchor: Anchor | None, head_seq: int, hash_at_anchor: str | None) -> AnchorCheck:
    """The store (its head's sequence, and the hash of its event at the anchored sequence) against `anchor`."""
    if anchor is None:
        return AnchorCheck(ok=True, reason="no anchor found for this store: the tail is not witnessed")
    if head_seq < anchor.seq:
        return AnchorCheck(ok=False, anchor=anchor, missing=(head_seq + 1, anchor.seq),
                           reason=f"the store ends at seq {head_seq} but was anchored at {anchor.describe()}: "
                                  f"events {head_seq + 1}..{anchor.seq} are missing (tail truncated)")
    if hash_at_anchor != anchor.hash:
        found = f"hash {hash_at_anchor[:12]}…" if hash_at_anchor else "no event"
        return AnchorCheck(ok=False, anchor=anchor, missing=(anchor.seq, anchor.seq),
                           reason=f"the store holds {found} at seq {anchor.seq}, anchored as {anchor.describe()}: "
                                  f"the chain was cut and rewritten at or before seq {anchor.seq}")
    return AnchorCheck(ok=True, anchor=anchor,
                       reason=f"the store reaches seq {head_seq} and matches its newest anchor, {anchor.describe()}")


# -- the witnesses (Kafka) --------------------------------------------------------------------------

def _on_each(clients: Clients, aliases: Iterable[str], do: Callable[[str], str], *, unreachable: str,
             failed: str) -> dict[str, str]:
    """`do` on every reachable cluster, each one's outcome in words: a cluster down or failing is said, not fatal.
    The clusters side by side: the lock of a failover waits for its anchors (a round trip or three each)."""
    def one(alias: str) -> str:
        try:
            return do(alias) if clients.admin(alias).ping(timeout_s=PING_S) else unreachable
        except (KafkaException, MirrorbookError) as exc:
            return f"{failed}: {cut(str(exc))}"

    names = sorted(set(aliases))
    if len(names) <= 1:
        return {alias: one(alias) for alias in names}
    with ThreadPoolExecutor(max_workers=len(names), thread_name_prefix="anchor") as pool:
        return dict(zip(names, pool.map(one, names)))


def _produce(clients: Clients, alias: str, anchor: Anchor) -> str:
    clients.admin(alias).create_topics({TOPIC: 1}, replication_factor=-1, configs=TOPIC_CONFIG)  # broker default RF
    errors: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    producer = Producer(client_config(clients.kafka_config(alias), acks="all", **{"enable.idempotence": True}))
    producer.produce(TOPIC, key=anchor.store.encode(), value=anchor.model_dump_json().encode(), on_delivery=delivered)
    if producer.flush(FLUSH_S) or errors:
        raise MirrorbookError(f"anchor not delivered to {TOPIC} on {alias}: {cut('; '.join(errors) or 'timed out')}")
    return f"anchored in {TOPIC}"


def write_anchor(store: AuditStore, clients: Clients, aliases: Iterable[str], run_id: str | None) -> dict[str, Any]:
    """Witness the store's head on every reachable cluster of `aliases`. Returns the anchor (None when there is
    nothing to anchor) and, per cluster, what became of it — an unreachable cluster is said, not fatal."""
    head = store.head()
    if head is None or head.store is None:
        return {"anchor": None, "clusters": {}, "reason": "nothing to anchor (empty store, or its head row is gone)"}
    anchor = Anchor(store=head.store, seq=head.seq, hash=head.hash, at=datetime.now(timezone.utc), run_id=run_id)
    done = _on_each(clients, aliases, lambda alias: _produce(clients, alias, anchor),
                    unreachable="unreachable: not anchored there", failed="not anchored")
    return {"anchor": anchor.model_dump(mode="json"), "clusters": done}


def _parse(raw: bytes | None, store: str) -> Anchor | None:
    if raw is None or len(raw) > MAX_ANCHOR_BYTES:
        return None
    try:
        anchor = Anchor.model_validate_json(raw)
    except ValidationError:
        return None
    return anchor if anchor.store == store else None


def read_anchors(clients: Clients, alias: str, store: str) -> list[Anchor]:
    """Every readable anchor of `store` on `alias` (records of other stores, or not ours, are passed over)."""
    admin = clients.admin(alias)
    if TOPIC not in admin.topics():
        return []
    tps = admin.partitions([TOPIC])
    marks = admin.watermarks(tps)
    found = []
    for m in read_ranges(clients.kafka_config(alias), {tp: (w.low, w.high) for tp, w in marks.items()},
                         timeout_s=READ_S):
        if m.key() == store.encode() and (anchor := _parse(m.value(), store)) is not None:
            found.append(anchor)
    return found


def check_store(store: AuditStore, clients: Clients, aliases: Iterable[str]) -> AnchorCheck:
    """The store against the newest anchor readable on `aliases` (unreachable clusters are said, not fatal)."""
    head = store.head()
    if head is None or head.store is None:
        return AnchorCheck(ok=True, reason="no head or no first event: the store has no identity to look "
                                           "anchors up by (the chain check reports a missing head)")
    identity = head.store
    anchors: list[Anchor] = []

    def read(alias: str) -> str:
        mine = read_anchors(clients, alias, identity)
        anchors.extend(mine)
        top = newest(mine)
        return f"{len(mine)} anchor(s)" + (f", newest seq {top.seq}" if top else "")

    said = _on_each(clients, aliases, read, unreachable="unreachable", failed="unreadable")
    best = newest(anchors)
    check = compare(best, head.seq, store.hash_at(best.seq) if best else None)
    check.clusters = said
    return check


__all__ = ["TOPIC", "Anchor", "AnchorCheck", "compare", "newest", "write_anchor", "read_anchors", "check_store"]
