"""A real failover scene for the parity jobs, built once per session on the devstack.

On A: topic `orders-*` (3 partitions x 300 records) and four groups parked there. MM2 mirrors the
topic to B as `A.orders-*` and emits checkpoints. For each group and partition the scene knows C
(committed on A), the MM2 translation (checkpoint downstream offset) and the *true* target offset,
proven by reading B: the offset of the record whose workload sequence number is C.

Then it plays a failover that went partly wrong on B:
- g-precise   committed at the true offset             -> OK
- g-mm2       committed at MM2's translation           -> RE-READ (true - translation)
- g-skip      committed 7 past the true offset         -> SKIP 7
- g-missing   never written to B                        -> MISSING
- g-precise also commits on B's `mirrorbook-canary`    -> UNEXPECTED (reported, not failing)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable, Iterator

import psutil
import pytest

from mirrorbook.devstack.stack import DevStack
from mirrorbook.devstack.workload import GroupSpec, load
from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.reader import read_ranges
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.records import Checkpoint
from mirrorbook.parity import connect, submit
from mirrorbook.parity.collector import ExpectedOffset, GroupBoundary
from tests.conftest import SparkConnectServer
from tests.helpers import eventually, spark_executor_pids, spark_last_stage, spark_tasks_since, wait_mirrored

PARTITIONS, RECORDS = 3, 300
SKIP_BY = 7
PARKED = {"g-precise": "end-40", "g-mm2": "end-40", "g-skip": "end-100", "g-missing": "end-10"}
CANARY = "mirrorbook-canary"


@dataclass(frozen=True)
class Position:
    group: str
    partition: int
    committed: int      # C on A
    translated: int     # MM2's checkpoint downstream offset on B
    true: int           # proven target offset of the record at C


@dataclass
class Scene:
    topic: str
    remote: str
    groups: dict[str, str]                 # role (g-precise, ...) -> unique group id
    positions: dict[tuple[str, int], Position]
    written: dict[str, dict[TP, int]]      # what the scene committed on B

    def expected(self, roles: list[str]) -> list[ExpectedOffset]:
        return [ExpectedOffset(cluster="B", group=self.groups[p.group], topic=self.remote, partition=p.partition,
                               expected_offset=p.translated, true_offset=p.true, source_cluster="A",
                               source_topic=self.topic, source_partition=p.partition, source_committed=p.committed)
                for (role, _), p in sorted(self.positions.items()) if role in roles]

    def boundaries(self, role: str, target: str = "written") -> list[GroupBoundary]:
        out = []
        for (r, part), p in sorted(self.positions.items()):
            if r != role:
                continue
            t = self.written[self.groups[role]][TP(self.remote, part)] if target == "written" else p.true
            out.append(GroupBoundary(group=self.groups[role], source_topic=self.topic, source_partition=part,
                                     source_committed=p.committed, target_topic=self.remote, target_partition=part,
                                     target_offset=t))
        return out


def _checkpoints(bootstrap_b: str, admin_b: KafkaAdmin, groups: set[str]) -> dict[tuple[str, int], Checkpoint]:
    tp = TP("A.checkpoints.internal", 0)
    end = admin_b.high_watermarks([tp])[tp]
    found: dict[tuple[str, int], Checkpoint] = {}
    for m in read_ranges(bootstrap_b, {tp: (0, end)}):
        cp = Checkpoint.decode(m.key(), m.value())
        if cp.group in groups:
            found[(cp.group, cp.partition)] = cp  # the last checkpoint per partition wins
    return found


def _true_offsets(bootstrap_b: str, remote: str, high: dict[TP, int]) -> dict[int, dict[int, int]]:
    """partition -> workload seq -> offset on B (seq = the record's offset on A)."""
    out: dict[int, dict[int, int]] = {}
    for part in range(PARTITIONS):
        tp = TP(remote, part)
        out[part] = {json.loads(m.value())["seq"]: m.offset() for m in read_ranges(bootstrap_b, {tp: (0, high[tp])})}
    return out


@pytest.fixture(scope="session")
def scene(devstack, admin_a: KafkaAdmin, admin_b: KafkaAdmin, bootstrap_a: str, bootstrap_b: str) -> Iterator[Scene]:
    import uuid

    uid = uuid.uuid4().hex[:6]
    topic, remote = f"orders-{uid}", f"A.orders-{uid}"
    groups = {role: f"{role}-{uid}" for role in PARKED}
    load(bootstrap_a, [topic], PARTITIONS, RECORDS,
         [GroupSpec(name=groups[r], position=pos) for r, pos in PARKED.items()])
    high = wait_mirrored(admin_a, admin_b, topic, remote)
    committed = admin_a.committed_offsets(list(groups.values()))

    def all_checkpointed() -> dict[tuple[str, int], Checkpoint]:
        cps = _checkpoints(bootstrap_b, admin_b, set(groups.values()))
        ok = all((g, p) in cps and cps[(g, p)].upstream_offset == committed[g][TP(topic, p)]
                 for g in groups.values() for p in range(PARTITIONS))
        return cps if ok else {}

    cps = eventually(all_checkpointed, timeout=120, what="checkpoints for every scene group")
    seq_to_offset = _true_offsets(bootstrap_b, remote, high)
    positions = {}
    for role, g in groups.items():
        for p in range(PARTITIONS):
            c = committed[g][TP(topic, p)]
            true = seq_to_offset[p].get(c, high[TP(remote, p)])  # C == end of A: the end of B
            positions[(role, p)] = Position(role, p, c, cps[(g, p)].downstream_offset, true)

    written = {
        groups["g-precise"]: {TP(remote, p): positions[("g-precise", p)].true for p in range(PARTITIONS)}
        | {TP(CANARY, 0): 0},
        groups["g-mm2"]: {TP(remote, p): positions[("g-mm2", p)].translated for p in range(PARTITIONS)},
        groups["g-skip"]: {TP(remote, p): positions[("g-skip", p)].true + SKIP_BY for p in range(PARTITIONS)},
    }
    results = admin_b.alter_group_offsets(written)
    assert all(e == "OK" for r in results.values() for e in r.values()), results
    yield Scene(topic=topic, remote=remote, groups=groups, positions=positions, written=written)
    if devstack.require().processes():  # the session's last test (of `devstack down`) leaves nothing to tidy
        admin_b.delete_groups(list(written))


# A clean pass by spark-submit is proven by the DAG tests (their proofs run that way): tests of a clean
# pass run on the Connect server only; the verdicts on seeded faults run both ways.
CONNECT_ONLY = pytest.mark.parametrize("run_job", ["spark-connect"], indirect=True)


@pytest.fixture(scope="module")
def spark(spark_connect: SparkConnectServer) -> Iterator:
    """A client of the session's Spark Connect server (its executors on the stack's Spark worker), for the tests that
    run the apps' own functions on rows they build: one Spark per test session, not a JVM of a module's own."""
    from pyspark.sql import SparkSession

    with connect.client_mode():
        session = SparkSession.builder.remote(spark_connect.url).getOrCreate()
        yield session
        session.stop()


@pytest.fixture(params=["spark-submit", "spark-connect"])
def run_job(request: pytest.FixtureRequest) -> Callable[[submit.SparkSubmitSpec], submit.ParitySummary]:
    """The same job two ways: a cold spark-submit, and the app's code as a client of the session's warm
    Spark Connect server (snapshots sent as Arrow tables, results written here from what came back)."""
    if request.param == "spark-submit":
        return lambda spec: submit.run(spec, timeout_s=600)
    url = request.getfixturevalue("spark_connect").url
    return lambda spec: connect.run(spec, url)


@pytest.fixture
def on_the_cluster(request: pytest.FixtureRequest) -> Callable[[], dict[str, int]]:
    """For a test run with `run_job` over Spark Connect: call it once the job ran; it asserts that the job's tasks
    (the stages since this fixture was set up) ran on the cluster's executors, none on the driver, each executor a
    JVM of its own (not the server's) started by a worker of the cluster, and returns the tasks each ran. With
    spark-submit (a local master of its own) there is nothing to check: {}."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is None or callspec.params.get("run_job") != "spark-connect":
        return dict
    server: SparkConnectServer = request.getfixturevalue("spark_connect")
    since = spark_last_stage(server.ui)
    devstack: DevStack = request.getfixturevalue("devstack")

    def check() -> dict[str, int]:
        ran = eventually(lambda: spark_tasks_since(server.ui, since), timeout=30, what="the job's tasks")
        assert "driver" not in ran, ran
        jvms = spark_executor_pids(server.ui)
        # The server's and workers' pids as the stack records them now, not as the session's fixture noted them: a
        # reused run dir's stack may have been restarted since.
        live = devstack.require().spark
        assert live is not None and live.process is not None
        workers = {n.name: n.process.pid for n in live.workers if n.process}
        for executor in ran:
            jvm = psutil.Process(jvms[executor])
            assert jvm.pid != live.process.pid and jvm.name() == "java"
            assert jvm.ppid() in workers.values(), (executor, jvm.ppid(), workers)
        return ran
    return check
