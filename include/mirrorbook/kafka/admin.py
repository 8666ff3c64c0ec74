"""Kafka admin operations mirrorbook needs, batched: every per-item request is issued at once and
awaited together, so cost grows with round trips, not with the number of groups or partitions.

`KafkaAdmin.per_pass()` is the same admin for one pass over many flows: one topic listing for all of them.
"""

from __future__ import annotations

import copy
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Callable, Iterable, Iterator, Mapping, TypeVar

from confluent_kafka import (ConsumerGroupTopicPartitions, IsolationLevel, KafkaError, KafkaException, TopicCollection,
                             TopicPartition)
from confluent_kafka.admin import (
    AdminClient,
    ClusterMetadata,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from pydantic import BaseModel

from mirrorbook.errors import MirrorbookError
from mirrorbook.kafka import access
from mirrorbook.kafka.config import client_config
from mirrorbook.kafka.types import TP
from mirrorbook.redaction import get_logger

log = get_logger(__name__)

# Group states in which nobody consumes: offsets may be written (Kafka's own rule for resets).
INACTIVE_STATES = {"EMPTY", "DEAD", "UNKNOWN_ABSENT"}
_MEMBERLESS = {"EMPTY", "DEAD"}  # states a group has only without members
# States of a group that holds no committed offsets: absent, or Dead (the coordinator moves a group to Dead as it
# removes its offsets — all expired, or the group deleted — and an older broker describes an unknown group so).
NO_OFFSETS = frozenset({"DEAD", "UNKNOWN_ABSENT"})
_TRANSIENT = {"NOT_LEADER_FOR_PARTITION", "UNKNOWN_TOPIC_OR_PART", "LEADER_NOT_AVAILABLE", "NOT_COORDINATOR",
              "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "_TIMED_OUT",
              # right after a broker restart its metadata can trail the client's (Kafka: retriable)
              "UNKNOWN_LEADER_EPOCH", "FENCED_LEADER_EPOCH",
              # a new leader answers ListOffsets so until its high watermark has caught up (Kafka: retriable)
              "OFFSET_NOT_AVAILABLE"}


_K = TypeVar("_K")
_V = TypeVar("_V")
# Group requests in flight at once per call (describe, offset fetch): a batch is answered well inside the request
# timeout on a busy broker, and its retry repeats only it.
GROUPS_PER_BATCH = 1000


# librdkafka times each admin request out at its request timeout, so every answer comes by then — but a future it
# never completed was seen once (10,000 groups described on an idle broker: no answer after ten minutes). A wait
# on answers is bounded too: twice the request timeout, then the attempt fails as a retriable timeout — the client
# is renewed for the next attempt or call (`_retrying`), which asks again while the call's retry deadline allows.
def _answered(futures: Mapping[_K, Future], request_timeout_s: float) -> Iterator[tuple[_K, Future]]:
    """Each (key, future) once answered, every one within 2 x the request timeout of this call."""
    until = time.monotonic() + 2 * request_timeout_s
    for key, fut in futures.items():
        try:
            fut.exception(timeout=max(0.0, until - time.monotonic()))
        except FutureTimeout:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, retriable=True, reason=(
                f"no answer within {2 * request_timeout_s:g}s ({sum(not f.done() for f in futures.values())} of "
                f"{len(futures)} request(s) unanswered)"))) from None
        yield key, fut


class KafkaAdminError(MirrorbookError):
    pass


class GroupActive(KafkaAdminError):
    """A group we would write offsets for has live members on the target."""

    def __init__(self, groups: dict[str, "GroupInfo"]) -> None:
        names = ", ".join(f"{g} ({i.state}, {i.members} member{'s' if i.members != 1 else ''})"
                          for g, i in sorted(groups.items()))
        super().__init__(f"Refusing to write offsets: consumer group(s) active on the target: {names}",
                         "stop those consumers (the group must be EMPTY or absent), then re-run")
        self.groups = groups


class GroupGotMembers(KafkaAdminError):
    """The group coordinator refused a write to groups that have members now (checked idle before)."""

    def __init__(self, refused: dict[str, str]) -> None:
        names = ", ".join(f"{g} ({err})" for g, err in sorted(refused.items()))
        super().__init__(f"Refusing to write offsets: the broker refused them for consumer group(s) that have members "
                         f"now: {names}; nothing was written to those groups",
                         "stop those consumers (the group must be EMPTY or absent), then re-run")
        self.groups = refused


# What a group coordinator answers a commit from outside the group (generation -1, no member id) while the group
# has members (classic and KIP-848 groups alike). Kafka decides it with the commit itself, atomically: a write
# needs no describe of its own first, and no consumer can join between a check and the write.
GROUP_HAS_MEMBERS = frozenset({"UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "REBALANCE_IN_PROGRESS",
                               "STALE_MEMBER_EPOCH", "FENCED_MEMBER_EPOCH"})


class GroupInfo(BaseModel):
    group: str
    state: str  # STABLE, EMPTY, PREPARING_REBALANCE, ..., DEAD; UNKNOWN_ABSENT when the group does not exist
    members: int = 0
    member_hosts: list[str] = []
    protocol_type: str | None = None

    @property
    def inactive(self) -> bool:
        return self.state in INACTIVE_STATES and self.members == 0


class Watermarks(BaseModel):
    low: int
    high: int
    lso: int | None = None


def _state_name(state: Any) -> str:
    name = getattr(state, "name", str(state))
    return "UNKNOWN_ABSENT" if name == "UNKNOWN" else name


class _Once:
    """A value the first caller makes and every later (or concurrent) caller shares. A failure is not
    kept: the next caller asks again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._value: Any = None

    def get(self, make: Callable[[], Any]) -> Any:
        with self._lock:
            if self._value is None:
                self._value = make()
            return self._value

    def forget(self) -> None:
        with self._lock:
            self._value = None


class KafkaAdmin:
    """Admin client for one cluster. `config` is librdkafka config (bootstrap.servers, security, SASL)."""

    def __init__(self, config: str | Mapping[str, Any], request_timeout_s: float = 15.0,
                 name: str | None = None, retry_deadline_s: float = 15.0) -> None:
        self.config = client_config(config)
        self.timeout = request_timeout_s
        self.retry_deadline_s = retry_deadline_s  # how long a retriable error is retried (a poller wants it short)
        self.who = access.Who.of(self.config, name)  # how refusals name this client (cluster alias, principal)
        self._reports = access.Reports(self.config)  # what librdkafka reports of this client: see `access`
        self._client = _Once()  # shared with per-pass views: a client renewed by one is renewed for all
        self._pass_listing: _Once | None = None  # set on a per-pass view only

    def per_pass(self) -> KafkaAdmin:
        """This admin for one pass over many flows: the same connections, and ONE topic listing (a metadata
        request covering every topic) taken by the first caller and shared by all — `topics`, `partitions`
        and `cluster_id` answer from it, so every flow of the pass sees the same listing. Offsets and groups
        are asked afresh as always. Topics created through the view drop the listing."""
        self._connect()  # before the copy: the view shares these connections
        view = copy.copy(self)
        view._pass_listing = _Once()
        return view

    @property
    def bootstrap(self) -> str:
        return str(self.config.get("bootstrap.servers"))

    @property
    def client(self) -> AdminClient:
        return self._connect()

    def _connect(self, probe_s: float | None = None) -> AdminClient:
        return self._client.get(lambda: self._new_client(probe_s or min(access.PROBE_S, self.timeout)))

    def _new_client(self, probe_s: float) -> AdminClient:
        """A client the cluster accepts: a refusal (credentials, TLS trust, protocol) is raised here, at the
        first call that needs the cluster, instead of surfacing as empty answers or timeouts."""
        self._reports.clear()
        client = AdminClient(self._reports.client_config(self.config))
        access.probe(client, self._reports, self.who, probe_s)
        return client

    def __repr__(self) -> str:
        return f"KafkaAdmin({self.bootstrap!r})"

    # -- cluster and topics -------------------------------------------------------------------------
    def ping(self, timeout_s: float = 5.0) -> bool:
        try:
            md = self._connect(probe_s=timeout_s).list_topics(timeout=timeout_s)
            return bool(md.brokers)
        except KafkaException:
            return False

    def _metadata(self) -> ClusterMetadata:
        """Every topic's metadata (one request); on a per-pass view, the pass's one listing."""
        return self._list_all() if self._pass_listing is None else self._pass_listing.get(self._list_all)

    def _list_all(self) -> ClusterMetadata:
        return self.client.list_topics(timeout=self.timeout)

    def broker_ids(self) -> set[int]:
        """The brokers the cluster's metadata lists now (a fenced or stopped one is not among them)."""
        return set(self.client.list_topics(timeout=self.timeout).brokers)

    def cluster_id(self) -> str | None:
        return self._metadata().cluster_id

    def topics(self, include_internal: bool = False) -> dict[str, int]:
        """Topic → partition count."""
        return {t: len(m.partitions) for t, m in self._metadata().topics.items()
                if include_internal or not t.startswith("__")}

    def partitions(self, topics: Iterable[str]) -> list[TP]:
        counts = self.topics(include_internal=True)
        out = []
        for t in topics:
            if t not in counts:
                raise KafkaAdminError(f"Topic {t!r} does not exist on {self.bootstrap}")
            out += [TP(t, p) for p in range(counts[t])]
        return out

    def create_topics(self, specs: Mapping[str, int], replication_factor: int = -1,
                      configs: Mapping[str, str] | None = None) -> list[str]:
        """Create missing topics (name → partitions), with the broker's default replication factor unless told.
        Returns those created; existing ones are left alone."""
        existing = self.topics(include_internal=True)
        new = [NewTopic(t, num_partitions=n, replication_factor=replication_factor, config=dict(configs or {}))
               for t, n in specs.items() if t not in existing]
        if not new:
            return []
        futures = self.client.create_topics(new, request_timeout=self.timeout)
        created = []
        for t, fut in futures.items():
            try:
                fut.result()
                created.append(t)
            except KafkaException as exc:
                if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
                    raise KafkaAdminError(f"Could not create topic {t}: {exc.args[0].str()}") from exc
        if self._pass_listing is not None:
            self._pass_listing.forget()
        self._wait_leaders(list(specs))
        return created

    def _wait_leaders(self, topics: list[str], timeout_s: float = 30.0) -> None:
        """A topic just created is usable once every partition has a leader the metadata shows."""
        deadline = time.monotonic() + timeout_s
        while True:
            md = self.client.list_topics(timeout=self.timeout)
            pending = [t for t in topics if t not in md.topics or md.topics[t].error is not None
                       or any(p.leader < 0 for p in md.topics[t].partitions.values())]
            if not pending:
                return
            if time.monotonic() > deadline:
                raise KafkaAdminError(f"Topics {pending} have no leader after {timeout_s:.0f}s on {self.bootstrap}")
            time.sleep(0.1)

    def topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics]
        if not resources:
            return {}
        futures = self.client.describe_configs(resources, request_timeout=self.timeout)
        return {res.name: {k: v.value for k, v in fut.result().items()} for res, fut in futures.items()}

    def topic_ids(self, topics: Iterable[str]) -> dict[str, str]:
        """Each topic's id (one DescribeTopics request): a topic deleted and created again under the same name
        gets a new one. A topic that does not exist (any more) is left out."""
        names = sorted(set(topics))
        if not names:
            return {}

        def attempt() -> dict[str, str]:
            futures = self.client.describe_topics(TopicCollection(names), request_timeout=self.timeout)
            out = {}
            for name, fut in _answered(futures, self.timeout):
                try:
                    out[name] = str(fut.result().topic_id)
                except KafkaException as exc:
                    if exc.args[0].name() != "UNKNOWN_TOPIC_OR_PART":
                        raise
            return out

        return self._retrying(attempt, "describe topics")

    # -- offsets ------------------------------------------------------------------------------------
    def _list_offsets(self, tps: list[TP], spec: OffsetSpec, isolation: IsolationLevel,
                      at_least: int = 0) -> dict[TP, int]:
        """Offsets per partition, each `at_least` this (-1: offsets-for-times found no record that recent). An
        answer below it is no offset — librdkafka has been seen to give -1001 (invalid) without an error for every
        partition of a busy broker, poll after poll — and is asked again through a new client, as a retriable
        error, within the deadline."""
        if not tps:
            return {}
        req = {TopicPartition(tp.topic, tp.partition): spec for tp in tps}

        def attempt() -> dict[TP, int]:
            futures = self.client.list_offsets(req, isolation_level=isolation, request_timeout=self.timeout)
            out = {TP(k.topic, k.partition): f.result().offset for k, f in _answered(futures, self.timeout)}
            invalid = sorted(str(tp) for tp, o in out.items() if o < at_least)
            if invalid:
                self._client.forget()  # the next attempt asks through a new client
                raise KafkaException(KafkaError(KafkaError.LEADER_NOT_AVAILABLE, retriable=True, reason=(
                    f"no offset in the answer for {len(invalid)} partition(s), e.g. {', '.join(invalid[:3])}")))
            return out

        return self._retrying(attempt, "list offsets")

    def _retrying(self, fn: Any, what: str, deadline_s: float | None = None) -> Any:
        """Repeat `fn` while the broker answers a retriable error (leader moving, metadata not yet there)."""
        deadline = time.monotonic() + (self.retry_deadline_s if deadline_s is None else deadline_s)
        delay = 0.1
        while True:
            try:
                return fn()
            except KafkaException as exc:
                err = exc.args[0]
                refusal = access.denied(err, self.who, what)
                if refusal is not None:
                    raise refusal from exc
                if err.name() == "_TIMED_OUT":
                    # A client that kept its connections across a broker's restart can time out on the
                    # coordinator's requests for good (seen for group offsets, while a new client is answered
                    # at once): the next attempt, or the next call, gets a new client.
                    self._client.forget()
                if not (err.retriable() or err.name() in _TRANSIENT) or time.monotonic() > deadline:
                    raise KafkaAdminError(f"{what} on {self.bootstrap} failed: {err.str()}") from exc
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def _in_batches(self, groups: list[str], attempt: Callable[[list[str]], dict[str, _V]], what: str
                    ) -> dict[str, _V]:
        """`attempt` over `groups` a batch at a time, each batch retried on its own: ten thousand requests queued
        at once on one coordinator outlast their request timeout at the tail (seen: a health check at 10,000
        groups, its offset fetches timed out while the broker worked through the queue)."""
        out: dict[str, _V] = {}
        for i in range(0, len(groups), GROUPS_PER_BATCH):
            batch = groups[i:i + GROUPS_PER_BATCH]
            out.update(self._retrying(lambda: attempt(batch), what))
        return out

    def watermarks(self, tps: Iterable[TP], with_lso: bool = False) -> dict[TP, Watermarks]:
        """Low and high watermarks (and last stable offsets) for many partitions, in one batch each."""
        tps = list(tps)
        low = self._list_offsets(tps, OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED)
        high = self._list_offsets(tps, OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED)
        lso = self._list_offsets(tps, OffsetSpec.latest(), IsolationLevel.READ_COMMITTED) if with_lso else {}
        return {tp: Watermarks(low=low[tp], high=high[tp], lso=lso.get(tp)) for tp in tps}

    def high_watermarks(self, tps: Iterable[TP]) -> dict[TP, int]:
        return self._list_offsets(list(tps), OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED)

    def last_stable_offsets(self, tps: Iterable[TP]) -> dict[TP, int]:
        """Each partition's last stable offset: the end as a read_committed consumer sees it (below an open
        transaction's first offset; the high watermark when none is open)."""
        return self._list_offsets(list(tps), OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)

    def offsets_for_times(self, tps: Iterable[TP], timestamp_ms: int) -> dict[TP, int]:
        """Per partition, the first offset whose record timestamp is at or after `timestamp_ms` (Kafka's
        offsetsForTimes, one batch); -1 where no record is that recent."""
        return self._list_offsets(list(tps), OffsetSpec.for_timestamp(timestamp_ms), IsolationLevel.READ_UNCOMMITTED,
                                  at_least=-1)

    # -- groups -------------------------------------------------------------------------------------
    def list_groups(self) -> dict[str, str]:
        """Group id → state for every group the cluster knows (that this principal may describe)."""
        def attempt() -> dict[str, str]:
            futures = {"groups": self.client.list_consumer_groups(request_timeout=self.timeout)}
            result = next(fut for _, fut in _answered(futures, self.timeout)).result()
            return {g.group_id: _state_name(g.state) for g in result.valid}

        return self._retrying(attempt, "list consumer groups")

    def group_states(self, groups: Iterable[str]) -> dict[str, GroupInfo]:
        """`describe_groups` for a caller that needs only whether each group is active: one ListGroups request a
        broker for all of them, not a request a group (10,000 describes cost ~7 s of a failover's critical path,
        measured). A group listed EMPTY or DEAD has no members, by the state's definition. Any other group is
        described: one listed active (its members and their hosts name it in a refusal), and one not listed —
        absent, or one this principal may not describe, which its describe refuses by name, as before."""
        groups = list(groups)
        listed = self.list_groups() if groups else {}
        # Only a state the broker stated is trusted: an older broker lists no states (UNKNOWN), and an absent
        # group is told from one this principal may not see by its describe alone.
        out = {g: GroupInfo(group=g, state=listed[g]) for g in groups if listed.get(g) in _MEMBERLESS}
        described = self.describe_groups([g for g in groups if g not in out])
        return {g: out.get(g) or described[g] for g in groups}

    def describe_groups(self, groups: Iterable[str], need: str | None = None) -> dict[str, GroupInfo]:
        """Each group's state and members. `need` (an ACL operation, e.g. "READ" — what writing a group's
        offsets takes): refuse, naming the groups, if this client's principal lacks it on any of them."""
        groups = list(groups)
        if not groups:
            return {}
        lacking: list[str] = []

        def attempt(batch: list[str]) -> dict[str, GroupInfo]:
            again = set(batch)
            lacking[:] = [g for g in lacking if g not in again]  # a retried batch's groups are judged again
            futures = self.client.describe_consumer_groups(batch, request_timeout=self.timeout,
                                                           include_authorized_operations=need is not None)
            out = {}
            for g, fut in _answered(futures, self.timeout):
                try:
                    d = fut.result()
                except KafkaException as exc:
                    if exc.args[0].name() == "GROUP_ID_NOT_FOUND":
                        out[g] = GroupInfo(group=g, state="UNKNOWN_ABSENT")
                        continue
                    raise
                out[g] = GroupInfo(group=g, state=_state_name(d.state), members=len(d.members),
                                   member_hosts=[m.host for m in d.members])
                ops = {getattr(o, "name", str(o)) for o in (d.authorized_operations or [])}
                if need is not None and need not in ops and "ALL" not in ops:
                    lacking.append(g)
            return out

        out = self._in_batches(groups, attempt, "describe consumer groups")
        if lacking:
            raise access.AccessDenied(
                f"{self.who.cluster}: principal {self.who.principal} lacks {need} on consumer group(s) "
                f"{', '.join(sorted(lacking))} — nothing was changed",
                f"grant it: kafka-acls --add --allow-principal {self.who.principal} --operation {need} --group "
                "<group> (or a prefixed pattern), or use a connection whose principal has it")
        return out

    def committed_offsets(self, groups: Iterable[str]) -> dict[str, dict[TP, int]]:
        """Committed offsets of many groups: a batch of requests in flight together."""
        groups = list(groups)
        # A thousand groups name the same few hundred partitions: one TP each, shared — 149,100 TPs made in a
        # task process holding Airflow's objects cost 1.5 s, most of it the cyclic GC's passes they set off.
        tps: dict[tuple[str, int], TP] = {}

        def attempt(batch: list[str]) -> dict[str, dict[TP, int]]:
            futures: dict[str, Future] = {}
            for g in batch:
                futures.update(self.client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g)],
                                                                       request_timeout=self.timeout))
            out: dict[str, dict[TP, int]] = {}
            for g, fut in _answered(futures, self.timeout):
                res = fut.result()
                offsets: dict[TP, int] = {}
                for tp in res.topic_partitions or []:
                    if tp.offset >= 0:
                        key = (tp.topic, tp.partition)
                        shared = tps.get(key)
                        if shared is None:
                            shared = tps[key] = TP(*key)
                        offsets[shared] = tp.offset
                out[g] = offsets
            return out

        return self._in_batches(groups, attempt, "list consumer group offsets")

    def alter_group_offsets(self, offsets: Mapping[str, Mapping[TP, int]],
                            require_inactive: bool = True) -> dict[str, dict[TP, str]]:
        """Write committed offsets. Refuses (before writing anything) groups that are not EMPTY/absent: with
        `require_inactive`, by describing them all first; without, as the broker refuses each group's write
        (`GroupGotMembers`, raised once every write is answered) — a caller that checked them already.

        Returns group → partition → "OK" or the broker's error for that partition.
        """
        offsets = {g: tps for g, tps in offsets.items() if tps}
        if require_inactive:
            info = self.describe_groups(offsets.keys())
            active = {g: i for g, i in info.items() if not i.inactive}
            if active:
                raise GroupActive(active)

        def attempt() -> dict[str, dict[TP, str]]:
            futures: dict[str, Future] = {}
            for g, tps in offsets.items():
                req = ConsumerGroupTopicPartitions(g, [TopicPartition(tp.topic, tp.partition, off)
                                                       for tp, off in sorted(tps.items())])
                futures.update(self.client.alter_consumer_group_offsets([req], request_timeout=self.timeout))
            out: dict[str, dict[TP, str]] = {}
            refused: dict[str, str] = {}
            for g, fut in _answered(futures, self.timeout):
                try:
                    res = fut.result()
                except KafkaException as exc:
                    if exc.args[0].name() not in GROUP_HAS_MEMBERS:
                        raise
                    refused[g] = exc.args[0].name()
                    continue
                out[g] = {TP(tp.topic, tp.partition): (tp.error.str() if tp.error else "OK")
                          for tp in res.topic_partitions}
                errors = {tp.error.name() for tp in res.topic_partitions if tp.error}
                if errors & GROUP_HAS_MEMBERS:
                    refused[g] = ", ".join(sorted(errors))
            if refused:
                raise GroupGotMembers(refused)
            return out

        return self._retrying(attempt, "alter consumer group offsets")

    def delete_groups(self, groups: Iterable[str]) -> None:
        groups = list(groups)
        if not groups:
            return
        for g, fut in self.client.delete_consumer_groups(groups, request_timeout=self.timeout).items():
            try:
                fut.result()
            except KafkaException as exc:
                if exc.args[0].name() not in ("GROUP_ID_NOT_FOUND",):
                    refusal = access.denied(exc.args[0], self.who, "delete consumer groups", on=g)
                    if refusal is not None:
                        raise refusal from exc
                    raise
