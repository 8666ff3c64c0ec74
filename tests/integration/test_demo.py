"""`mirrorbook demo` against the session's real devstack: flows replicating, checkpoints for its groups,
the Spark Connect server for the parity proofs."""

from __future__ import annotations

import re

import pytest

from mirrorbook.cli import main
from mirrorbook.demo import GROUP_POSITIONS, TOPIC_NAMES
from mirrorbook.devstack.stack import DevStack

pytestmark = pytest.mark.integration


def _set_spark_setting(stack: DevStack, value: bool) -> None:
    state = stack.require()
    state.settings = state.settings.model_copy(update={"spark": value})
    stack.state_path.write_text(state.model_dump_json(indent=2))


def test_demo_shows_flows_lag_checkpoints_and_spark_connect(devstack, spark_connect, unique, capsys):
    prefix = f"d{unique[-6:]}"  # its own topics and groups on the shared stack
    # Stored settings without Spark, as a stack from an earlier demo has them (its server stays up: the
    # session's): the demo must ask for the server again. Put back whatever happens.
    _set_spark_setting(devstack, False)
    try:
        rc = main(["demo", "--run-dir", str(devstack.run_dir), "--prefix", prefix, "--records", "500",
                   # the whole demo's deadline: MM2 discovers new groups and emits their checkpoints on its own
                   # intervals, which a loaded 2-core machine stretches (50 s ran out once)
                   "--timeout", "150"])
        assert devstack.require().settings.spark, "the demo did not ask for the Spark Connect server"
    finally:
        _set_spark_setting(devstack, True)
    captured = capsys.readouterr()
    out = captured.out
    assert rc == 0, out + captured.err
    # The session stack (with its Spark Connect server, as `make demo` wants it) was reused, not restarted.
    assert "already running: nothing to start" in out
    assert devstack.require().processes()["spark-connect"].pid == spark_connect.pid
    for flow in ("A->B", "B->A"):
        assert re.search(rf"^{re.escape(flow)}\s+REPLICATING\s", out, re.M), out
    for topic in TOPIC_NAMES:
        assert re.search(rf"^A:{prefix}-{topic}\s+B:A\.{prefix}-{topic}\s+3\s+\d+\s+0$", out, re.M), out
    # Every required group has a checkpoint on every partition: committed offset -> translated offset.
    for name, position in GROUP_POSITIONS.items():
        rows = re.findall(rf"^{prefix}-{name}\s+A\.{prefix}-\S+\s+\d\s+(\d+) -> (\d+|\(none)", out, re.M)
        assert len(rows) == 3 * 3, (name, out)
        if name != "untouched":
            assert all(int(down) <= int(up) for up, down in rows), rows  # conservative, never ahead
    assert re.search(rf"^Spark Connect server: {re.escape(spark_connect.url)} \(local\[\*\], pid {spark_connect.pid}\)$",
                     out, re.M), out
    assert "parity proofs" in out and f"spark_connect_default,\n  written to {devstack.connections_path}" in out
    assert f"--groups '{prefix}-.*' --mode precise --topology {devstack.topology_path}" in out
    assert f"mirrorbook devstack down --purge --run-dir {devstack.run_dir}" in out
