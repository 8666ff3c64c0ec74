"""The RPO sampler: a sample of each flow's source end offsets and of what MM2 has replicated, seconds old when
the source is lost — what an unplanned failover's RPO lower bound and its estimate stand on.

The health check samples the source too, but on its schedule (minutes): when the source dies, what it last saw
is up to that old, and a lower bound from it says "at least 0" while records were lost. The sampler polls every
`poll_s` (default 1 s) for one period (its DAG's schedule, `mm2_rpo_sampler`), cheaply:

- per source cluster, one ListOffsets (the end offsets of every partition its flows replicate; the topic
  listing behind it is renewed every LISTING_S, not each poll);
- per flow, the source connector's offsets from Connect (what MM2 has replicated);
- records, not offsets, only where they differ: a partition that has shown offsets without records (transaction
  markers, aborted records — in the health check's last sample, or in the sampler's first poll, which counts
  every lagging partition once) has its lag range counted at each poll (`mm2/lag.py`, bounded); any other is
  taken by offsets — a partition no transactional producer writes has no marker — and said so (`by`).

Only the newest sample per flow is kept (the audit store's `replication_samples`: one row per flow, replaced
each poll). It carries the produce rate over the last RATE_WINDOW_S of polls (offsets per second), and once
a poll cannot reach the source, `unreachable_since` (that poll's start): the source died after the sample and
no later than that. `rpo.rpo_lower_bound` reads it.

Pure sampling and keeping: the Airflow trigger (`airflow/triggers/rpo.py`) only runs `run_sampler` in the
triggerer's event loop; blocking client calls go to threads.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict, deque
from datetime import datetime, timezone
from typing import Any, Callable

from pydantic import BaseModel, Field

from mirrorbook.audit import AuditStore
from mirrorbook.clients import Clients
from mirrorbook.connect import AsyncConnectClient
from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.flows import PartitionLag, lag_rows
from mirrorbook.mm2.lag import count_lag, shows_gaps
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.redaction import get_logger
from mirrorbook.replication import backend_for
from mirrorbook.runbooks.params import FlowsSelection
from mirrorbook.runbooks.user_topics import record_kind
from mirrorbook.topology import FlowSpec

log = get_logger(__name__)

POLL_S = 1.0
LISTING_S = 30.0          # the source's topic listing is renewed this often
REQUEST_TIMEOUT_S = 5.0   # a poll of a dead cluster gives up in seconds, not a client default
RATE_WINDOW_S = 30.0      # the produce rate is measured over this long (kept in memory, never stored)
SOURCE = "rpo_sampler"


def _now() -> datetime:
    return datetime.now(timezone.utc)


MAX_PERIOD_S = 3600


class SamplerParams(FlowsSelection):
    """The sampler DAG's form (and the scheduled run's defaults)."""

    flows: str = Field(".*", title="Flows (regex)",
                       description="whole-name regex of the flows to sample, e.g. A->B; default: all")
    poll_s: float = Field(POLL_S, ge=0.2, le=60, title="Poll every (s)",
                          description="one ListOffsets per source cluster and one Connect read per flow each time")
    period_s: int = Field(330, ge=10, le=MAX_PERIOD_S, title="Sample for (s)",
                          description="how long one run samples: its schedule's period and a little more, so "
                                      "that the next run has started before this one ends")



class FlowSample(BaseModel):
    """One flow's replication as one poll saw it. `partitions`: rows shaped like a health sample's (`FlowStatus.
    metrics`) — high_watermark, replicated_offset, offset_lag, lag, lag_low — plus `by`: `records` (the lag range
    counted) or `offsets` (taken by offsets: the partition never showed an offset without a record)."""

    flow: str
    source: str
    observed_at: datetime
    partitions: list[dict[str, Any]]
    rate: float | None = None          # source offsets per second over the last RATE_WINDOW_S of polls
    rate_window_s: float | None = None
    unreachable_since: datetime | None = None  # the first poll after this one that could not reach the source
    replicated_from: datetime | None = None    # when Connect's offsets were read (an older poll's, if Connect failed)
    notes: list[str] = Field(default_factory=list)

    def stored(self) -> dict[str, Any]:
        return {"source": SOURCE, **self.model_dump(mode="json")}

    @classmethod
    def from_stored(cls, flow: str, data: dict[str, Any]) -> "FlowSample":
        return cls.model_validate({**data, "flow": flow})


def user_partition(policy: ReplicationPolicy, topic: str) -> bool:
    """A topic of user records (not Kafka's, MM2's, Connect's or mirrorbook's own)."""
    return record_kind(policy, topic) is None


class _SourcePoller:
    """The flows of one source cluster, polled together: one ListOffsets for all of them."""

    def __init__(self, sampler: "Sampler", alias: str, flows: list[FlowSpec]) -> None:
        self.sampler, self.alias, self.flows = sampler, alias, flows
        self.admin = KafkaAdmin(sampler.clients.kafka_config(alias), request_timeout_s=REQUEST_TIMEOUT_S,
                                name=alias, retry_deadline_s=REQUEST_TIMEOUT_S)
        self.listing: tuple[float, dict[str, int]] | None = None

    def _topics(self) -> dict[str, int]:
        if self.listing is None or time.monotonic() - self.listing[0] > LISTING_S:
            self.listing = (time.monotonic(), self.admin.topics(include_internal=True))
        return self.listing[1]

    def _ends(self, replicated: dict[str, dict[TP, int]]) -> dict[TP, int]:
        """The end offsets of every partition of the topics each flow's connector has replicated."""
        topics = self._topics()
        wanted = {tp.topic for offs in replicated.values() for tp in offs}
        tps = [TP(t, p) for t in sorted(wanted) if t in topics for p in range(topics[t])]
        return self.admin.high_watermarks(tps)

    async def poll(self) -> None:
        s = self.sampler
        started = _now()
        replicated = {f.name: r for f, r in zip(self.flows, await asyncio.gather(
            *(s.replicated(f) for f in self.flows)))}
        try:
            ends = await asyncio.to_thread(self._ends, {k: v[0] for k, v in replicated.items() if v is not None})
        except Exception as exc:  # the source is gone (or refuses): keep the last sample, say since when
            self.listing = None
            for f in self.flows:
                await s.unreachable(f, started, str(exc))
            return
        for f in self.flows:
            if (got := replicated[f.name]) is not None:
                await s.sampled(f, self.admin, started, ends, *got)


class Sampler:
    """Polls the flows' sources and keeps each flow's newest sample (`keep`: the audit store's, by default)."""

    def __init__(self, clients: Clients, flows: list[FlowSpec], audit: AuditStore | None = None, *,
                 keep: Callable[[FlowSample], None] | None = None) -> None:
        self.clients, self.flows, self.audit = clients, flows, audit
        self.keep = keep or self._keep_in_audit
        self.newest: dict[str, FlowSample] = {}
        self.polls = self.failures = 0
        self.flagged: dict[str, set[TP]] = defaultdict(set)   # partitions seen with offsets without records
        self.classified: set[str] = set()                     # flows whose lagging partitions were all counted once
        self._last_replicated: dict[str, tuple[dict[TP, int], datetime]] = {}
        self._ends: dict[str, deque[tuple[datetime, dict[tuple[str, int], int]]]] = defaultdict(deque)
        by_source: dict[str, list[FlowSpec]] = defaultdict(list)
        for f in flows:
            by_source[f.source].append(f)
        self.pollers = [_SourcePoller(self, alias, fs) for alias, fs in by_source.items()]
        if audit is not None:
            self._flag_from_health(audit)

    def _flag_from_health(self, audit: AuditStore) -> None:
        from mirrorbook.runbooks.health.results import latest_sample

        for f in self.flows:
            sample = latest_sample(audit, f.name)
            for row in (sample.metrics.get("partitions") or []) if sample else []:
                if isinstance(row, dict) and shows_gaps(row):
                    self.flagged[f.name].add(TP(row["topic"], int(row["partition"])))

    def _keep_in_audit(self, sample: FlowSample) -> None:
        assert self.audit is not None
        self.audit.keep_replication_sample(sample.flow, sample.observed_at, sample.stored())

    async def replicated(self, flow: FlowSpec) -> tuple[dict[TP, int], datetime] | None:
        """Connect's replicated offsets now — or, when Connect does not answer, the last ones read (the sample's
        lag then starts a little early; the bound it gives stays a lower bound)."""
        try:
            offsets = await backend_for(self.clients, flow).areplicated_offsets()
            self._last_replicated[flow.name] = (offsets, _now())
        except Exception as exc:
            log.warning("RPO sampler: offsets of %s unreadable: %s", flow.name, exc)
        return self._last_replicated.get(flow.name)

    async def sampled(self, flow: FlowSpec, admin: KafkaAdmin, started: datetime, ends: dict[TP, int],
                      replicated: dict[TP, int], replicated_at: datetime) -> None:
        policy = ReplicationPolicy.for_flow(flow)
        mine = {tp for tp in replicated if user_partition(policy, tp.topic)}
        # Only partitions MM2 has an offset for: one it never replicated from may have lost its start to
        # retention, and offsets there would over-count.
        highs = {tp: h for tp, h in ends.items() if tp in mine}
        rows = lag_rows(flow, {tp: o for tp, o in replicated.items() if tp in mine}, highs, {})
        first = flow.name not in self.classified
        count = [r for r in rows if r.offset_lag and (first or TP(r.topic, r.partition) in self.flagged[flow.name])]
        notes: list[str] = []
        counted: dict[TP, PartitionLag] = {}
        if count:
            try:
                done = await asyncio.to_thread(count_lag, admin, count)
                counted = {TP(r.topic, r.partition): r for r in done}
            except Exception as exc:
                notes.append(f"records not counted: {exc}")
        self.classified.add(flow.name)
        out = []
        for r in rows:
            tp = TP(r.topic, r.partition)
            c = counted.get(tp)
            if c is not None and c.lag < (c.offset_lag or 0):
                self.flagged[flow.name].add(tp)
            if c is not None or (tp in self.flagged[flow.name] and not r.offset_lag):  # nothing lags: 0, exactly
                row = (c or r).model_dump() | {"by": "records"}
            elif tp in self.flagged[flow.name]:
                row = r.model_dump() | {"by": "not-counted"}  # lag_low 0: nothing proven
            else:
                row = r.model_dump() | {"lag_low": r.lag, "by": "offsets"}
            out.append({k: row[k] for k in ("topic", "partition", "high_watermark", "replicated_offset", "offset_lag",
                                            "lag", "lag_low", "by")})
        rate, window = self._rate(flow.name, started, {(p["topic"], p["partition"]): p["high_watermark"]
                                                       for p in out})
        sample = FlowSample(flow=flow.name, source=flow.source, observed_at=started, partitions=out, rate=rate,
                            rate_window_s=window, replicated_from=replicated_at,
                            notes=notes)
        self.newest[flow.name] = sample
        self.polls += 1
        await asyncio.to_thread(self.keep, sample)

    def _rate(self, flow: str, at: datetime, ends: dict[tuple[str, int], int]) -> tuple[float | None, float | None]:
        """Source offsets per second over the last RATE_WINDOW_S (producers write in bursts: the last poll alone
        says little), from the end offsets of the polls kept in memory for that long."""
        kept = self._ends[flow]
        kept.append((at, ends))
        while len(kept) > 2 and (at - kept[1][0]).total_seconds() >= RATE_WINDOW_S:
            kept.popleft()
        first_at, first = kept[0]
        window = (at - first_at).total_seconds()
        if window <= 0:
            return None, None
        grown = sum(max(0, end - first[k]) for k, end in ends.items() if k in first)
        return round(grown / window, 3), round(window, 3)

    async def unreachable(self, flow: FlowSpec, since: datetime, error: str) -> None:
        """The source did not answer a poll that started at `since`: the newest sample keeps its figures and
        learns since when the source is gone (once: the first failed poll is what bounds the outage's start)."""
        self.failures += 1
        last = self.newest.get(flow.name)
        if last is None and self.audit is not None:
            kept = await asyncio.to_thread(self.audit.replication_sample, flow.name)
            last = FlowSample.from_stored(flow.name, kept.metrics) if kept is not None else None
        if last is None or last.unreachable_since is not None:
            return
        log.warning("RPO sampler: %s's source %s unreachable since %s: %s", flow.name, flow.source,
                    since.isoformat(), error)
        last = last.model_copy(update={"unreachable_since": since})
        self.newest[flow.name] = last
        await asyncio.to_thread(self.keep, last)


class _Unclosed:
    """A Connect client a backend may close after each call, kept open for the next poll (a client costs a TLS
    context each time it is made)."""

    def __init__(self, client: AsyncConnectClient) -> None:
        self.client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    async def close(self) -> None:
        return None


class KeptConnections(Clients):
    """`base`'s clients, with one Connect client per Connect cluster kept open across polls (`aclose` ends them)."""

    def __init__(self, base: Clients) -> None:
        super().__init__(base.resolver)
        self.base = base
        self._kept: dict[str, _Unclosed] = {}

    def admin(self, alias: str) -> KafkaAdmin:
        return self.base.admin(alias)

    def async_connect(self, flow: FlowSpec, **kw: Any) -> AsyncConnectClient:
        if kw:
            return self.base.async_connect(flow, **kw)
        if flow.connect_cluster not in self._kept:
            self._kept[flow.connect_cluster] = _Unclosed(self.base.async_connect(flow))
        # _Unclosed stands in for the client (it forwards every call but close): what a backend asks of one.
        return self._kept[flow.connect_cluster]  # type: ignore[return-value]

    async def aclose(self) -> None:
        await asyncio.gather(*(k.client.close() for k in self._kept.values()), return_exceptions=True)
        self._kept.clear()


class SamplerRun(BaseModel):
    flows: list[str]
    polls: int
    failures: int
    newest: dict[str, str | None]  # flow -> its newest sample's time
    transactional: dict[str, list[str]]  # flow -> partitions counted in records


async def run_sampler(clients: Clients, flows: list[FlowSpec], audit: AuditStore | None, *, duration_s: float,
                      poll_s: float = POLL_S, keep: Callable[[FlowSample], None] | None = None) -> SamplerRun:
    """Poll every `poll_s` for `duration_s`, each source cluster on its own (a dead one delays only its flows)."""
    kept = KeptConnections(clients)
    sampler = Sampler(kept, flows, audit, keep=keep)
    deadline = time.monotonic() + duration_s

    async def loop(poller: _SourcePoller) -> None:
        while time.monotonic() < deadline:
            t0 = time.monotonic()
            try:
                await poller.poll()
            except Exception as exc:  # a poll must never end the sampler: the next one tries again
                log.warning("RPO sampler: poll of %s failed: %s", poller.alias, exc)
            await asyncio.sleep(max(0.0, min(poll_s - (time.monotonic() - t0), deadline - time.monotonic())))

    try:
        await asyncio.gather(*(loop(p) for p in sampler.pollers))
    finally:
        await kept.aclose()
    return SamplerRun(flows=[f.name for f in flows], polls=sampler.polls, failures=sampler.failures,
                      newest={f.name: s.observed_at.isoformat() if (s := sampler.newest.get(f.name)) else None
                              for f in flows},
                      transactional={k: sorted(str(tp) for tp in v) for k, v in sampler.flagged.items() if v})


__all__ = ["FlowSample", "Sampler", "SamplerParams", "SamplerRun", "run_sampler", "POLL_S", "SOURCE"]
