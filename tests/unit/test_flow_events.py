"""The health check's memory of each flow's state, the changes it announces (Asset events), and how
mm2_failover_on_alert reads them: episodes, consecutive checks, the cooldown kept in the audit store.
(Real health-check runs drive them in tests/dags/test_flow_events.py.)"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

from mirrorbook.audit import AuditStore
from mirrorbook.runbooks import alerts
from mirrorbook.runbooks.alerts import Episode
from mirrorbook.runbooks.engine import RunInfo, Runbook
from mirrorbook.runbooks.health.events import MEMORY_RUN, flow_uri, memory, remember
from mirrorbook.topology import FailoverOnAlert, TopologyError, load_topology
from tests.unit.test_params import TOPOLOGY

T0 = datetime(2026, 11, 25, 12, 0, tzinfo=timezone.utc)
ENDS = {"A->B": ("A", "B"), "B->A": ("B", "A")}
WATCHING = TOPOLOGY.model_copy(update={"failover_on_alert": FailoverOnAlert(enabled=True, flows="A->B",
                                                                            consecutive_checks=2)})


@pytest.fixture
def audit(tmp_path: Path) -> AuditStore:
    return AuditStore(f"sqlite:///{tmp_path / 'audit.db'}")


def check(audit: AuditStore, run_id: str, minutes: int, **states: str) -> list:
    rb = Runbook(RunInfo(run_id=run_id, dag_id="mm2_health_check", task_id="flow_events"), audit)
    found = [{"flow": f.replace("_", "->"), "state": s, "max_lag": 3, "total_lag": 5} for f, s in states.items()]
    return remember(rb, found, T0 + timedelta(minutes=minutes), ENDS)


def test_a_change_is_announced_once_and_a_steady_state_counts_checks(audit: AuditStore) -> None:
    first = check(audit, "h1", 0, A_B="REPLICATING", B_A="REPLICATING")
    assert [(c.flow, c.old_state, c.new_state) for c in first] == [("A->B", None, "REPLICATING"),
                                                                   ("B->A", None, "REPLICATING")]
    assert check(audit, "h2", 5, A_B="REPLICATING", B_A="REPLICATING") == []
    [down] = check(audit, "h3", 10, A_B="NOT_REPLICATING", B_A="REPLICATING")
    assert down.uri == "mirrorbook://flows/A/B" == flow_uri("A", "B")
    assert down.extra() == {"flow": "A->B", "source": "A", "target": "B", "old_state": "REPLICATING",
                            "new_state": "NOT_REPLICATING", "max_lag": 3, "total_lag": 5, "check_run_id": "h3",
                            "observed_at": "2026-11-25T12:10:00Z"}
    assert check(audit, "h4", 15, A_B="NOT_REPLICATING", B_A="REPLICATING") == []
    now = memory(audit, "A->B")
    assert (now.state, now.since_run_id, now.checks, now.previous_state) == ("NOT_REPLICATING", "h3", 2, "REPLICATING")
    assert memory(audit, "B->A").checks == 4
    changed = audit.events(action="step.flow.state_changed")
    assert [(e.flow, e.state_before, e.state_after, e.run_id) for e in changed][-1] == (
        "A->B", {"state": "REPLICATING"}, {"state": "NOT_REPLICATING"}, "h3")


def test_a_retried_check_announces_its_changes_again_and_counts_nothing_twice(audit: AuditStore) -> None:
    check(audit, "h1", 0, A_B="REPLICATING")
    [again] = check(audit, "h2", 5, A_B="NOT_REPLICATING")
    [retried] = check(audit, "h2", 5, A_B="NOT_REPLICATING")  # its task's events were never registered: again
    assert retried == again and memory(audit, "A->B").checks == 1
    assert len(audit.events(action="step.flow.state_changed", run_id="h2")) == 1
    check(audit, "h3", 10, A_B="NOT_REPLICATING")
    assert check(audit, "h3", 10, A_B="NOT_REPLICATING") == [] and memory(audit, "A->B").checks == 2
    assert set(audit.progress(MEMORY_RUN)) == {"A->B"}


def test_episodes_are_changes_to_not_replicating_of_watched_flows() -> None:
    changes = [{"flow": "A->B", "new_state": "NOT_REPLICATING", "check_run_id": "h3"},
               {"flow": "B->A", "new_state": "NOT_REPLICATING", "check_run_id": "h3"},  # not watched
               {"flow": "A->B", "new_state": "REPLICATING", "check_run_id": "h2"}]
    assert alerts.episodes(WATCHING, changes) == [Episode(flow="A->B", since_run_id="h3")]
    assert alerts.episodes(TOPOLOGY, changes) == []  # not enabled: nothing is watched


def test_an_episode_is_down_after_enough_checks_and_over_when_the_flow_changes(audit: AuditStore) -> None:
    check(audit, "h1", 0, A_B="NOT_REPLICATING")
    episode = Episode(flow="A->B", since_run_id="h1")
    assert alerts.sort_out(audit, [episode], 2)["waiting"] == [episode]
    check(audit, "h2", 5, A_B="NOT_REPLICATING")
    assert alerts.sort_out(audit, [episode], 2)["down"] == [episode]
    check(audit, "h3", 10, A_B="REPLICATING")
    assert alerts.sort_out(audit, [episode], 2)["over"] == [episode]
    check(audit, "h4", 15, A_B="NOT_REPLICATING")  # down again: another episode
    assert alerts.standing(memory(audit, "A->B"), episode, 1) == "over"
    # A manual run watches the flow's current episode, if it is one.
    assert alerts.episodes(WATCHING, [], "A->B", audit) == [Episode(flow="A->B", since_run_id="h4")]
    check(audit, "h5", 20, A_B="REPLICATING")
    assert alerts.episodes(WATCHING, [], "A->B", audit) == []


def test_no_proposal_within_the_cooldown_of_a_failover_a_rejection_or_a_proposal(audit: AuditStore) -> None:
    episode = Episode(flow="A->B", since_run_id="h3")
    now = datetime.now(timezone.utc)
    assert alerts.cooling(audit, episode, 3600, now) is None
    audit.record(run_id="f1", dag_id="mm2_failover", action="groups.alter_offsets", kind="call", result="planned",
                 mutating=True, flow="A->B")  # a dry run changed nothing
    assert alerts.cooling(audit, episode, 3600, now) is None
    audit.record(run_id="f1", dag_id="mm2_failover", action="step.approval.decision", kind="step", result="refused",
                 mutating=False, flow="A->B")
    assert "mm2_failover run f1 of A->B was not approved" in alerts.cooling(audit, episode, 3600, now)
    assert alerts.cooling(audit, episode, 3600, now + timedelta(hours=2)) is None  # the cooldown is over
    rb = Runbook(RunInfo(run_id="a1", dag_id="mm2_failover_on_alert", task_id="propose_failover"), audit)
    alerts.record_proposal(rb, episode, 2, alerts.proposal_run_id(episode))
    later = now + timedelta(minutes=1)
    other = Episode(flow="A->B", since_run_id="h9")
    assert "a failover of A->B was proposed (run failover_on_alert__" in alerts.cooling(audit, other, 3600, later)
    # Its own proposal (a retry of it) does not hold an episode back; the rejection before it still does.
    assert "was not approved" in alerts.cooling(audit, episode, 3600, later)


def test_a_proposal_is_one_unplanned_failover_per_episode_that_always_asks() -> None:
    e = Episode(flow="A->B", since_run_id="scheduled__2026-11-25T12:00:00+00:00")
    run_id = alerts.proposal_run_id(e)
    assert run_id == alerts.proposal_run_id(e.model_copy()) != alerts.proposal_run_id(
        e.model_copy(update={"since_run_id": "h2"}))
    assert run_id.startswith("failover_on_alert__A-_B__") and set(run_id) <= set(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
    assert alerts.proposal_conf("A->B") == {"flow": "A->B", "mode": "unplanned", "approval": "required"}


def test_the_switch_is_off_by_default_and_checked(tmp_path: Path) -> None:
    assert TOPOLOGY.failover_on_alert.enabled is False and TOPOLOGY.failover_on_alert.watched(TOPOLOGY) == []
    assert [f.name for f in WATCHING.failover_on_alert.watched(WATCHING)] == ["A->B"]
    path = tmp_path / "t.yaml"
    for bad, named in (({"enabled": True, "consecutive_checks": 0}, "consecutive_checks"),
                       ({"enabled": True, "flows": "(a"}, "flows"), ({"enable": True}, "enable")):
        path.write_text(yaml.safe_dump({**TOPOLOGY.model_dump(mode="json"), "failover_on_alert": bad}))
        with pytest.raises(TopologyError, match=named):
            load_topology(path)


def test_the_docs_switch_is_one_the_topology_accepts() -> None:
    from tests import docs

    blocks = [yaml.safe_load(b) for b in docs.yaml_blocks("docs/operating.md")]
    [switch] = [b["failover_on_alert"] for b in blocks if set(b) == {"failover_on_alert"}]
    assert FailoverOnAlert.model_validate(switch).enabled is True


@pytest.mark.airflow
def test_the_wait_ends_when_the_episode_lasted_enough_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The trigger mm2_failover_on_alert defers to: it polls the health check's memory, and fires once the next
    check has counted (here recorded while it waits)."""
    import asyncio

    from mirrorbook.airflow.triggers.alerts import FlowsDownTrigger

    url = f"sqlite:///{tmp_path / 'audit.db'}"
    monkeypatch.setenv("MIRRORBOOK_AUDIT_URL", url)
    audit = AuditStore(url)
    check(audit, "h1", 0, A_B="NOT_REPLICATING", B_A="NOT_REPLICATING")
    trigger = FlowsDownTrigger(episodes=[{"flow": "A->B", "since_run_id": "h1"}, {"flow": "B->A", "since_run_id": "h1"}],
                               checks=2, timeout_s=30, poll_s=0.05)
    path, kwargs = trigger.serialize()
    assert path == "mirrorbook.airflow.triggers.alerts.FlowsDownTrigger" and FlowsDownTrigger(**kwargs).episodes

    async def wait() -> dict:
        first = asyncio.ensure_future(trigger.run().__anext__())
        await asyncio.sleep(0.3)
        assert not first.done()  # one check only: waiting
        await asyncio.to_thread(check, audit, "h2", 5, A_B="NOT_REPLICATING", B_A="REPLICATING")
        return (await asyncio.wait_for(first, 10)).payload

    fired = asyncio.run(wait())
    assert fired == {"status": "success", "down": [{"flow": "A->B", "since_run_id": "h1"}],
                     "over": [{"flow": "B->A", "since_run_id": "h1"}], "waiting": []}
