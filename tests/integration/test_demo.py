"""`mirrorbook demo` against the session's real devstack: flows replicating, checkpoints for its groups."""

from __future__ import annotations

import re

import pytest

from mirrorbook.cli import main
from mirrorbook.demo import GROUP_POSITIONS, TOPIC_NAMES

pytestmark = pytest.mark.integration


def test_demo_shows_flows_lag_and_checkpoints(devstack, unique, capsys):
    prefix = f"d{unique[-6:]}"  # its own topics and groups on the shared stack
    rc = main(["demo", "--run-dir", str(devstack.run_dir), "--prefix", prefix, "--records", "500",
               "--timeout", "50"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "already running: nothing to start" in out  # the session stack was reused, not restarted
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
    assert f"--groups '{prefix}-.*' --mode precise --topology {devstack.topology_path}" in out
    assert f"mirrorbook devstack down --purge --run-dir {devstack.run_dir}" in out
