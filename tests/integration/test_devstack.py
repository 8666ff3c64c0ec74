"""The devstack against itself: real brokers, a real Connect worker, the real MM2 connectors."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from mirrorbook.devstack.config import StackSettings
from mirrorbook.devstack.errors import PortInUse, ProcessDied, ToolMissing
from mirrorbook.devstack.stack import DevStack
from mirrorbook.devstack.workload import GroupSpec, load
from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.reader import read_ranges
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.records import Checkpoint, Heartbeat
from mirrorbook.topology import load_topology
from tests.helpers import eventually, wait_mirrored

pytestmark = pytest.mark.integration


def test_group_committing_on_a_gets_checkpoints_on_b(devstack, admin_a, admin_b, bootstrap_a, bootstrap_b, unique):
    topic, group = f"cp-{unique}", f"group-{unique}"
    load(bootstrap_a, [topic], partitions=2, records_per_partition=300,
         groups=[GroupSpec(name=group, position="end-40")])
    wait_mirrored(admin_a, admin_b, topic, f"A.{topic}")

    def checkpoints() -> dict[int, Checkpoint]:
        tp = TP("A.checkpoints.internal", 0)
        end = admin_b.high_watermarks([tp])[tp]
        found = {}
        for m in read_ranges(bootstrap_b, {tp: (0, end)}):
            cp = Checkpoint.decode(m.key(), m.value())
            if cp.group == group:
                found[cp.partition] = cp
        return found if len(found) == 2 else {}

    found = eventually(checkpoints, timeout=90, what=f"checkpoints for {group}")
    assert set(found) == {0, 1}
    for p, cp in found.items():
        assert cp.topic == f"A.{topic}"  # checkpoints name the *target* topic
        assert cp.upstream_offset == 260
        assert 0 <= cp.downstream_offset <= 260  # conservative: never past the true position


def test_heartbeats_flow(devstack, admin_b, bootstrap_b):
    tp = TP("heartbeats", 0)

    def beats() -> set[tuple[str, str]]:
        end = admin_b.high_watermarks([tp])[tp]
        return {(h.source_cluster_alias, h.target_cluster_alias)
                for h in (Heartbeat.decode(m.key(), m.value()) for m in read_ranges(bootstrap_b, {tp: (0, end)}))}

    assert ("A", "B") in eventually(beats, timeout=30, what="heartbeats A->B on B")
    # The B->A flow's heartbeats land in A's `heartbeats`, which A->B mirrors back to B.
    eventually(lambda: "A.heartbeats" in admin_b.topics(), timeout=60, what="A.heartbeats on B")


def test_up_twice_is_a_no_op(devstack):
    before = {n: p.pid for n, p in devstack.require().processes().items()}
    result = devstack.up()
    assert result == {"started": [], "connectors_configured": [], "already_running": True}
    assert {n: p.pid for n, p in devstack.require().processes().items()} == before


def test_status_and_topology_describe_the_stack(devstack, stack_state):
    status = devstack.status()
    flows = {f["name"]: f for f in status["flows"]}
    assert set(flows) == {"A->B", "B->A"}
    for f in flows.values():
        states = {name: c["state"] for name, c in f["connectors"].items()}
        assert set(states.values()) == {"RUNNING"}, states
    topo = load_topology(status["topology"])
    assert topo.flow("A->B").connectors.source == "A->B.MirrorSourceConnector"
    assert topo.clusters["A"].bootstrap_servers == stack_state.brokers["A"].bootstrap
    # The CLI prints the same as JSON.
    out = subprocess.run([sys.executable, "-m", "mirrorbook.cli", "devstack", "status", "--json",
                          "--run-dir", str(devstack.run_dir)], capture_output=True, text=True, check=True)
    assert '"A->B.MirrorSourceConnector"' in out.stdout


# -- lifecycle on a stack of its own ---------------------------------------------------------------

@pytest.fixture
def own_stack(tmp_path: Path):
    stack = DevStack(tmp_path / "own")
    yield stack
    stack.down(purge=True)


def test_stop_start_cluster_and_down_leaves_nothing(own_stack, devstack):
    own_stack.up(StackSettings(reverse=True))
    procs = own_stack.require().processes()
    assert set(procs) == {"broker-A", "broker-B", "connect-B", "connect-A"}

    # A site failure: cluster A's broker and the Connect worker running against it go down together.
    assert own_stack.stop_cluster("A", kill=True) is True
    assert not procs["broker-A"].alive() and not procs["connect-A"].alive()
    assert procs["broker-B"].alive() and procs["connect-B"].alive()
    assert own_stack.stop_cluster("A") is False  # idempotent
    assert own_stack.start_cluster("A") is True
    assert own_stack.start_cluster("A") is False
    restarted = own_stack.require().processes()
    assert restarted["broker-A"].pid != procs["broker-A"].pid and restarted["connect-A"].pid != procs["connect-A"].pid
    assert "mirrorbook-canary" in KafkaAdmin(own_stack.require().brokers["A"].bootstrap).topics()  # data kept
    flows = {f["name"]: f for f in own_stack.status()["flows"]}
    assert {c["state"] for c in flows["B->A"]["connectors"].values()} == {"RUNNING"}

    # --broker-only leaves the worker up.
    assert own_stack.stop_cluster("A", broker_only=True) is True
    assert restarted["connect-A"].alive() and not restarted["broker-A"].alive()
    assert own_stack.start_cluster("A") is True

    final = own_stack.require().processes()
    assert set(own_stack.down()) == {"broker-A", "broker-B", "connect-B", "connect-A"}
    assert not any(p.alive() for p in [*procs.values(), *restarted.values(), *final.values()])
    assert own_stack.require().processes() == {}
    assert own_stack.down() == []  # idempotent
    # The session stack was not touched by this stack's `down` (pids, never names).
    assert all(p.alive() for p in devstack.require().processes().values())


def test_port_in_use_is_named_before_anything_starts(tmp_path: Path):
    with socket.socket() as s:
        s.bind(("localhost", 0))
        s.listen()
        port = s.getsockname()[1]
        stack = DevStack(tmp_path / "busy")
        with pytest.raises(PortInUse) as err:
            stack.up(StackSettings(), port_base=port)
    assert str(port) in str(err.value) and "--port-base" in str(err.value)
    assert stack.load() is None  # nothing was recorded, nothing started


def test_jvm_dying_at_start_names_its_log(tmp_path: Path):
    stack = DevStack(tmp_path / "dies")
    with pytest.raises(ProcessDied) as err:
        stack.up(StackSettings(extra_jvm_opts=["-XX:+ThisOptionDoesNotExist"]))
    assert str(tmp_path / "dies" / "logs") in str(err.value)
    assert not any(p.alive() for p in stack.require().processes().values())  # the other JVMs were stopped


def test_missing_java_names_the_install_command(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(ToolMissing) as err:
        DevStack(tmp_path / "nojava").up(StackSettings())
    assert "apt-get install -y openjdk-17-jre-headless" in str(err.value)


def test_missing_maven_names_the_install_command(tmp_path: Path, monkeypatch):
    from mirrorbook import maven

    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(maven.MavenMissing) as err:
        maven.resolve(["org.example:nothing:1"], "x", root=tmp_path / "cache")
    assert "apt-get install -y maven" in str(err.value)


def test_unreachable_maven_central_is_named(tmp_path: Path, monkeypatch):
    from mirrorbook import maven

    monkeypatch.setenv("MIRRORBOOK_MAVEN_REPO", "http://127.0.0.1:9/maven2")
    monkeypatch.setenv("MIRRORBOOK_MAVEN_LOCAL_REPO", str(tmp_path / "m2"))
    with pytest.raises(maven.MavenUnreachable) as err:
        maven.resolve(["org.apache.kafka:kafka-clients:4.3.1"], "kc", root=tmp_path / "cache")
    assert "unreachable" in str(err.value) and "MIRRORBOOK_MAVEN_REPO" in str(err.value)
