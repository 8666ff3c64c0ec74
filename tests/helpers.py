"""Test helpers: polling for an eventual condition, and reading what a consumer would see."""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Mapping, TypeVar

from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.config import client_config
from mirrorbook.kafka.reader import read_ranges
from mirrorbook.kafka.types import TP

T = TypeVar("T")
Config = str | Mapping[str, Any]  # bootstrap servers, or a client config (a secured stack's)


def eventually(fn: Callable[[], T], *, timeout: float = 60.0, interval: float = 0.5, what: str = "condition") -> T:
    """Call `fn` until it returns a truthy value (returned) or raises no AssertionError; fail at `timeout`."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            value = fn()
            if value:
                return value
            last = value
        except AssertionError as exc:
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")
        time.sleep(interval)


def wait_mirrored(admin_src: KafkaAdmin, admin_dst: KafkaAdmin, topic: str, remote: str,
                  timeout: float = 90.0) -> dict[TP, int]:
    """Wait until every partition of `remote` on the target has as many records as `topic` on the source."""
    tps = admin_src.partitions([topic])
    want = admin_src.high_watermarks(tps)

    def caught_up() -> dict[TP, int] | None:
        if remote not in admin_dst.topics():
            return None
        got = admin_dst.high_watermarks([TP(remote, tp.partition) for tp in tps])
        return got if all(got[TP(remote, tp.partition)] >= want[tp] for tp in tps) else None

    return eventually(caught_up, timeout=timeout, what=f"{topic} mirrored to {remote}")


def produce_records(config: Config, topic: str, partition: int,
                    records: list[tuple[tuple[bytes, bytes, list], int]]) -> None:
    """Write exactly these records (key, value, headers) with their timestamps to one partition, flushed: a copy
    written by hand as MM2 would have written it, or a foreign record."""
    from confluent_kafka import Producer

    producer = Producer(client_config(config, **{"enable.idempotence": True}))
    for (key, value, headers), ts in records:
        producer.produce(topic, key=key, value=value, headers=headers, partition=partition, timestamp=ts)
    assert producer.flush(30) == 0


def set_topic_config(bootstrap: Config, topic: str, key: str, value: str | None) -> None:
    """Set one config of a topic (None: delete it, back to the broker's default)."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    res = ConfigResource(ResourceType.TOPIC, topic,
                         incremental_configs=[ConfigEntry(key, value, incremental_operation=op)])
    admin = AdminClient(client_config(bootstrap))  # kept referenced until the futures resolve
    for fut in admin.incremental_alter_configs([res]).values():
        fut.result()


def seqs(bootstrap: Config, tp: TP, start: int, end: int) -> list[int]:
    """The workload sequence numbers a consumer positioned at `start` reads up to `end`."""
    return [json.loads(m.value())["seq"] for m in read_ranges(bootstrap, {tp: (start, end)})]


def next_seqs_as_group(bootstrap: Config, group: str, tps: list[TP], timeout: float = 30.0) -> dict[TP, int | None]:
    """What a consumer of `group` reads first on each partition, starting from the group's committed
    offsets (auto.offset.reset=error: a missing offset fails instead of silently starting elsewhere).
    None: the group is at the end of that partition. Assigns, never joins: the group stays inactive."""
    from confluent_kafka import OFFSET_STORED, Consumer, KafkaException, TopicPartition

    admin = KafkaAdmin(bootstrap)
    highs = admin.high_watermarks(tps)
    committed = admin.committed_offsets([group]).get(group, {})
    missing = [tp for tp in tps if tp not in committed]
    assert not missing, f"group {group} has no committed offset on {missing}"
    out: dict[TP, int | None] = {tp: None for tp in tps if committed[tp] >= highs[tp]}
    todo = {tp for tp in tps if tp not in out}
    if not todo:
        return out
    c = Consumer(client_config(bootstrap, **{"group.id": group, "enable.auto.commit": False,
                                             "auto.offset.reset": "error"}))
    try:
        c.assign([TopicPartition(tp.topic, tp.partition, OFFSET_STORED) for tp in todo])
        deadline = time.monotonic() + timeout
        while todo and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                raise KafkaException(m.error())
            tp = TP(m.topic(), m.partition())
            if tp in todo:
                out[tp] = json.loads(m.value())["seq"]
                todo.discard(tp)
                c.pause([TopicPartition(tp.topic, tp.partition)])
    finally:
        c.close()
    assert not todo, f"no record read for {sorted(todo)} as group {group}"
    return out


class ActiveConsumer:
    """A real consumer, subscribed as a member of `group` (so the group is STABLE/active) until stopped."""

    def __init__(self, bootstrap: Config, group: str, topics: list[str]) -> None:
        import threading

        from confluent_kafka import Consumer

        self.consumer = Consumer(client_config(bootstrap, **{"group.id": group, "enable.auto.commit": False,
                                                             "auto.offset.reset": "latest",
                                                             "session.timeout.ms": 10000}))
        self.consumer.subscribe(topics)
        self.group, self.bootstrap = group, bootstrap
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(0.2)

    def __enter__(self) -> "ActiveConsumer":
        self._thread.start()
        admin = KafkaAdmin(self.bootstrap)
        eventually(lambda: admin.describe_groups([self.group])[self.group].members > 0, timeout=30,
                   what=f"{self.group} active")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def spark_status(ui: str, path: str = "") -> Any:
    """What the status API of the Spark application behind web UI `ui` says at `path` (under its application)."""
    import httpx

    app = httpx.get(f"{ui}/api/v1/applications", timeout=10).raise_for_status().json()[0]["id"]
    return httpx.get(f"{ui}/api/v1/applications/{app}{path}", timeout=10).raise_for_status().json()


def spark_last_stage(ui: str) -> int:
    """The highest stage id the application has had (-1: none yet): a job's stages are the ones after it."""
    return max((s["stageId"] for s in spark_status(ui, "/stages")), default=-1)


def spark_tasks_since(ui: str, stage: int) -> dict[str, int]:
    """How many tasks of the stages after `stage` each executor ran ("driver": the driver's own JVM, as on a
    local master), once every such stage is complete (the status API learns of them a moment after the job)."""
    stages = [s for s in spark_status(ui, "/stages") if s["stageId"] > stage]
    if not stages or any(s["status"] == "ACTIVE" for s in stages):
        return {}
    ran: dict[str, int] = {}
    for s in stages:
        for task in spark_status(ui, f"/stages/{s['stageId']}/{s['attemptId']}/taskList?length=100000"):
            ran[task["executorId"]] = ran.get(task["executorId"], 0) + 1
    return ran


def spark_executor_pids(ui: str) -> dict[str, int]:
    """Each executor's JVM: the process listening on the host:port the status API gives it."""
    import psutil

    listening = {c.laddr.port: c.pid for c in psutil.net_connections("tcp") if c.status == psutil.CONN_LISTEN}
    return {e["id"]: listening[int(e["hostPort"].rsplit(":", 1)[1])] for e in spark_status(ui, "/executors")
            if e["isActive"]}
