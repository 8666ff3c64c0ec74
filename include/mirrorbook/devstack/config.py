"""Settings of a devstack and the files rendered from them: broker, worker, connector and log configs."""

from __future__ import annotations

from pathlib import Path

from typing import Annotated, Mapping

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mirrorbook.mm2.internal_topics import OffsetSyncsLocation
from mirrorbook.topology import FlowSpec, PolicyName

MIRROR_PKG = "org.apache.kafka.connect.mirror"
BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"
POLICIES = {"default": f"{MIRROR_PKG}.DefaultReplicationPolicy", "identity": f"{MIRROR_PKG}.IdentityReplicationPolicy"}


class Mm2Settings(BaseModel):
    """MM2 knobs tests and drills need. Defaults are tuned for a fast local stack, not production."""

    model_config = ConfigDict(extra="forbid")
    checkpoint_interval_s: int = Field(5, ge=1)
    heartbeat_interval_s: int = Field(1, ge=1)
    refresh_topics_interval_s: int = Field(5, ge=1)
    refresh_groups_interval_s: int = Field(5, ge=1)
    offset_lag_max: int = Field(100, ge=0)
    sync_group_offsets: bool = False
    sync_group_offsets_interval_s: int = Field(5, ge=1)
    replication_policy: PolicyName = "default"
    separator: str = "."
    topics: str = ".*"
    groups: str = ".*"
    source_tasks_max: int = Field(1, ge=1)
    # Where MM2 keeps its offset-syncs. A DR flow should say `target` (KIP-716): with the default (`source`)
    # they are lost with the source cluster, and an unplanned failover cannot use them; on the target they
    # survive the disaster they are needed for.
    offset_syncs_location: OffsetSyncsLocation = "source"


class StackSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    aliases: tuple[str, str] = ("A", "B")
    # Brokers per cluster (`brokers_of`: a cluster's own count, e.g. a DR target larger than its source). With 3 or
    # more, the first three are also the KRaft controllers (a quorum of 3 survives the loss of any one node, at no
    # extra JVM); with 2, the first alone (a quorum of 2 survives no loss at all).
    brokers: int = Field(1, ge=1, le=9)
    brokers_of: dict[str, Annotated[int, Field(ge=1, le=9)]] = Field(default_factory=dict)
    reverse: bool = False
    mm2: Mm2Settings = Field(default_factory=Mm2Settings)
    broker_heap_mb: int = 320
    connect_heap_mb: int = 384
    offset_flush_interval_ms: int = 1000
    extra_jvm_opts: list[str] = Field(default_factory=list)
    # A local Spark Connect server (local[*], the Kafka source on its classpath) for the parity proofs.
    spark: bool = False
    spark_driver_memory_mb: int = Field(1024, ge=256)
    # 0: the server runs local[*]. N: on a Spark standalone cluster of the stack's own, a master and N workers, an
    # executor of `spark_executor_memory_mb` (Spark's own default, which a spark-submit job's executor gets too) on
    # each (devstack/spark.py). N implies `spark`. At most 4: each worker is two JVMs more on one machine.
    spark_workers: int = Field(0, ge=0, le=4)
    spark_executor_memory_mb: int = Field(1024, ge=256)
    # SASL_SSL brokers with ACLs, Connect on HTTPS + basic auth (devstack/security.py). Fixed at the first `up`:
    # a stack's listeners and data are made for one or the other.
    secure: bool = False

    @model_validator(mode="after")
    def _workers_mean_spark(self) -> "StackSettings":
        if self.spark_workers:
            self.spark = True
        return self

    @model_validator(mode="after")
    def _known_clusters(self) -> "StackSettings":
        unknown = sorted(set(self.brokers_of) - set(self.aliases))
        if unknown:
            raise ValueError(f"brokers_of names {', '.join(unknown)}: this stack's clusters are "
                             f"{', '.join(self.aliases)}")
        return self

    def count(self, alias: str) -> int:
        """Cluster `alias`'s brokers."""
        return self.brokers_of.get(alias, self.brokers)

    def replication_factor(self, alias: str) -> int:
        """Every topic's on cluster `alias`, internal ones included: min(3, brokers), as a production cluster's."""
        return min(3, self.count(alias))

    def voters(self, alias: str) -> int:
        return 3 if self.count(alias) >= 3 else 1


def jvm_opts(heap_mb: int, log4j: Path, extra: list[str]) -> list[str]:
    # SerialGC and C1-only JIT keep four JVMs small and quick to start on two cores.
    return [f"-Xms{min(heap_mb, 128)}m", f"-Xmx{heap_mb}m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-XX:MaxMetaspaceSize=192m", "-XX:ReservedCodeCacheSize=64m", "-Xss512k",
            "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={log4j}", *extra]


def render_properties(props: dict[str, object]) -> str:
    return "".join(f"{k}={_prop(v)}\n" for k, v in props.items())


def _prop(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def broker_properties(broker_port: int, controller_port: int | None, data_dir: Path, *, node_id: int = 1,
                      voters: str | None = None, replication_factor: int = 1) -> dict[str, object]:
    """One KRaft node: a combined broker and controller when it has a `controller_port` (a voter of `voters`,
    `id@host:port,…`; alone when None), a broker only otherwise."""
    listeners = f"PLAINTEXT://localhost:{broker_port}" + (
        f",CONTROLLER://localhost:{controller_port}" if controller_port else "")
    # A lost broker must not stop writes: with 3 replicas, 2 in sync suffice (and 1 when there is only 1).
    min_isr = min(2, replication_factor)
    return {
        "process.roles": "broker,controller" if controller_port else "broker",
        "node.id": node_id,
        "controller.quorum.voters": voters or f"{node_id}@localhost:{controller_port}",
        "listeners": listeners,
        "advertised.listeners": listeners,
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": data_dir,
        "num.partitions": 1,
        "default.replication.factor": replication_factor,
        "min.insync.replicas": min_isr,
        "offsets.topic.replication.factor": replication_factor,
        "offsets.topic.num.partitions": 5,
        "transaction.state.log.replication.factor": replication_factor,
        "transaction.state.log.min.isr": min_isr,
        "transaction.state.log.num.partitions": 3,
        "share.coordinator.state.topic.replication.factor": replication_factor,
        "share.coordinator.state.topic.min.isr": min_isr,
        "group.initial.rebalance.delay.ms": 0,
        "auto.create.topics.enable": False,
        "num.network.threads": 2,
        "num.io.threads": 2,
        "log.retention.hours": 168,
        # Retention acts within seconds, not the default 5 minutes: a topic's retention.ms set low deletes its
        # records while a test (or a demo of the health check's DATA_LOSS) waits.
        "log.retention.check.interval.ms": 2000,
        # The cleaner's dedupe map is allocated on the heap whenever its threads start, 128 MiB by default: two
        # fifths of a devstack broker's heap, which a restart of the threads (any dynamic cleaner setting does one)
        # may fail to find late in a busy session, leaving the broker without a cleaner. 16 MiB dedupes ~600,000
        # keys a pass.
        "log.cleaner.dedupe.buffer.size": 16 * 1024 * 1024,
        # Compaction within seconds of a segment becoming cleanable, not 15 s: MM2's offset syncs compacted as they
        # would be in hours, while a test waits.
        "log.cleaner.backoff.ms": 1000,
    }


def worker_properties(alias: str, bootstrap: str, rest_port: int, settings: StackSettings) -> dict[str, object]:
    # Internal topic names end in ".internal" so MM2's default topics.exclude never mirrors them.
    return {
        "bootstrap.servers": bootstrap,
        "group.id": f"mirrorbook-connect-{alias}",
        "listeners": f"http://localhost:{rest_port}",
        "rest.advertised.host.name": "localhost",
        "rest.advertised.port": rest_port,
        "key.converter": BYTES,
        "value.converter": BYTES,
        "header.converter": BYTES,
        "config.storage.topic": f"connect-configs-{alias}.internal",
        "offset.storage.topic": f"connect-offsets-{alias}.internal",
        "status.storage.topic": f"connect-status-{alias}.internal",
        "config.storage.replication.factor": settings.replication_factor(alias),
        "offset.storage.replication.factor": settings.replication_factor(alias),
        "offset.storage.partitions": 5,
        "status.storage.replication.factor": settings.replication_factor(alias),
        "status.storage.partitions": 1,
        "offset.flush.interval.ms": settings.offset_flush_interval_ms,
        "plugin.discovery": "service_load",
        "task.shutdown.graceful.timeout.ms": 3000,
        "connector.client.config.override.policy": "All",
    }


def connector_configs(flow: FlowSpec, bootstraps: dict[str, str], mm2: Mm2Settings,
                      replication: Mapping[str, int] | None = None) -> dict[str, dict[str, str]]:
    """The three MM2 connector configs of one flow, keyed by connector name; the topics MM2 creates with the
    replication factor of the cluster they live on (`replication`: alias -> factor, 1 when absent): the remote
    topics, checkpoints and heartbeats on the target, the offset-syncs where `offset_syncs_location` says."""
    rf = {alias: str((replication or {}).get(alias, 1)) for alias in (flow.source, flow.target)}
    syncs_on = flow.source if mm2.offset_syncs_location == "source" else flow.target
    common = {
        "source.cluster.alias": flow.source,
        "target.cluster.alias": flow.target,
        "source.cluster.bootstrap.servers": bootstraps[flow.source],
        "target.cluster.bootstrap.servers": bootstraps[flow.target],
        "replication.policy.class": POLICIES[flow.replication_policy],
        "replication.policy.separator": flow.separator,
        "key.converter": BYTES,
        "value.converter": BYTES,
        "header.converter": BYTES,
        "replication.factor": rf[flow.target],
        "offset-syncs.topic.replication.factor": rf[syncs_on],
        "checkpoints.topic.replication.factor": rf[flow.target],
        "heartbeats.topic.replication.factor": rf[flow.target],
        "offset.lag.max": str(mm2.offset_lag_max),
        "topics": mm2.topics,
        "groups": mm2.groups,
        "refresh.topics.interval.seconds": str(mm2.refresh_topics_interval_s),
        "refresh.groups.interval.seconds": str(mm2.refresh_groups_interval_s),
        "emit.checkpoints.interval.seconds": str(mm2.checkpoint_interval_s),
        "emit.heartbeats.interval.seconds": str(mm2.heartbeat_interval_s),
        "sync.group.offsets.enabled": str(mm2.sync_group_offsets).lower(),
        "sync.group.offsets.interval.seconds": str(mm2.sync_group_offsets_interval_s),
        "sync.topic.acls.enabled": "false",
        "offset-syncs.topic.location": mm2.offset_syncs_location,
    }
    specific = {
        "source": {"connector.class": f"{MIRROR_PKG}.MirrorSourceConnector", "tasks.max": str(mm2.source_tasks_max)},
        "checkpoint": {"connector.class": f"{MIRROR_PKG}.MirrorCheckpointConnector", "tasks.max": "1"},
        "heartbeat": {"connector.class": f"{MIRROR_PKG}.MirrorHeartbeatConnector", "tasks.max": "1"},
    }
    return {flow.connector(role): {**common, **extra} for role, extra in specific.items()}


LOG4J2 = """Configuration:
  status: warn
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: INFO
      AppenderRef:
        - ref: STDOUT
    Logger:
      - name: org.apache.kafka.clients
        level: WARN
      - name: org.apache.kafka.common.utils.AppInfoParser
        level: WARN
      - name: org.reflections
        level: ERROR
      - name: kafka.log
        level: WARN
      - name: org.apache.kafka.storage
        level: WARN
"""
