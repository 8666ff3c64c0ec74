"""The order a flow's parts are taken in (`roles_for`): the whole flow, one part, or the parts named — always in the
order that keeps replication consistent for the target state, whatever order they were named in."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mirrorbook.replication.mm2_connect_states import ORDER_DOWN, ORDER_UP, roles_for


def test_the_whole_flow_and_one_part():
    assert roles_for("all", "STOPPED") == ["source", "checkpoint", "heartbeat"]
    assert roles_for("all", "RUNNING") == ["heartbeat", "checkpoint", "source"]
    assert roles_for("checkpoint", "STOPPED") == ["checkpoint"]


@given(st.lists(st.sampled_from(ORDER_DOWN), unique=True), st.sampled_from(["STOPPED", "PAUSED", "RUNNING"]))
def test_the_parts_named_come_in_the_states_order(named, target):
    order = ORDER_UP if target == "RUNNING" else ORDER_DOWN
    got = roles_for(named, target)
    assert sorted(got) == sorted(named)  # each named part once, no other
    assert got == [r for r in order if r in got]  # in the target's order
