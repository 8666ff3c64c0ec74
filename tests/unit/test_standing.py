"""Where a run stands when it stops short: the run so far, each flow connector now, what a re-run will do — and
what the failed task had already changed, in its own error."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given, settings, strategies as st

from mirrorbook.audit import AuditStore
from mirrorbook.audit.models import RequestSummary
from mirrorbook.bounds import ECHO_LIMIT, shown
from mirrorbook.clients import Clients
from mirrorbook.connect import ConnectSettings
from mirrorbook.connect.errors import ConnectDeadlineExceeded, ConnectServerError, Where
from mirrorbook.connect.models import ConnectorStatus, TaskState, WorkerState
from mirrorbook.runbooks.connectors import rerun_sentence
from mirrorbook.runbooks.engine import Mutation, RunInfo, Runbook
from mirrorbook.runbooks.move_report import move_report, render_report
from mirrorbook.runbooks.standing import FlowNow, PartNow, at_failure, set_state_rerun, so_far
from mirrorbook.topology import ConnectClusterSpec, FlowSpec, KafkaClusterSpec, Topology

CLOSED = "localhost:9"  # nothing listens on the discard port here: connecting is refused
FLOW = FlowSpec(source="A", target="B", connect_cluster="B")
TOPOLOGY = Topology(clusters={"A": KafkaClusterSpec(connection_id="a"), "B": KafkaClusterSpec(connection_id="b")},
                    connect_clusters={"B": ConnectClusterSpec(connection_id="c")}, flows=[FLOW])
AT = datetime(2026, 11, 23, 12, 3, 4, tzinfo=timezone.utc)


def status(role: str, state: str, tasks: list[str] | None = None) -> ConnectorStatus:
    return ConnectorStatus(name=FLOW.connector(role), connector=WorkerState(state=state),
                           tasks=[TaskState(id=i, state=s) for i, s in enumerate(tasks or [])])


def test_a_rerun_says_the_calls_the_runbook_would_make_from_the_state_it_would_find():
    half_paused = {"source": status("source", "PAUSED", ["PAUSED"]), "checkpoint": status("checkpoint", "RUNNING", ["RUNNING"]),
                   "heartbeat": status("heartbeat", "RUNNING", ["RUNNING"])}
    assert rerun_sentence(half_paused, "all", "PAUSED") == \
        "pause checkpoint; then pause heartbeat; and leave source (PAUSED already)"
    assert rerun_sentence(half_paused, "all", "RUNNING") == "resume source; and leave heartbeat (RUNNING already), " \
                                                            "checkpoint (RUNNING already)"
    failed = {**half_paused, "source": status("source", "RUNNING", ["FAILED"])}
    assert rerun_sentence(failed, "source", "RUNNING") == "restart source"
    assert rerun_sentence({"checkpoint": status("checkpoint", "STOPPED")}, "checkpoint", "STOPPED") == \
        "change nothing (checkpoint (STOPPED already))"
    assert rerun_sentence({}, "source", "STOPPED") == \
        "read source and stop it unless it is STOPPED (its state is unknown)"


def test_the_flow_now_names_each_part_and_where_its_state_comes_from():
    read = FlowNow(flow="A->B", place="Connect cluster B (http://b:8083)", read_at=AT, parts=[
        PartNow(role="source", status=status("source", "PAUSED", ["PAUSED"])),
        PartNow(role="checkpoint", status=status("checkpoint", "RUNNING", ["FAILED"])),
        PartNow(role="heartbeat", status=None)])
    assert read.render() == ("flow A->B now: source PAUSED, checkpoint RUNNING (tasks 0:FAILED), heartbeat absent "
                             "(read at 12:03:04Z from Connect cluster B (http://b:8083))")
    last = FlowNow(flow="A->B", place="Connect cluster B (http://b:8083)",
                   unreadable="Connect cluster B (http://b:8083) could not be read now (no answer)", parts=[
        PartNow(role="source", status=status("source", "PAUSED"), source="pause accepted, run r1", at=AT),
        PartNow(role="checkpoint", known=False)])
    assert last.render() == ("flow A->B: Connect cluster B (http://b:8083) could not be read now (no answer); "
                             "last known: source PAUSED (pause accepted, run r1, 2026-11-23T12:03:04Z), checkpoint unknown")
    assert set_state_rerun("PAUSED")([last]) == (
        "on A->B, read checkpoint and pause it unless it is PAUSED (its state is unknown); then read heartbeat and "
        "pause it unless it is PAUSED (its state is unknown); and leave source (PAUSED already) (said from the last "
        "known state: it reads each part first)")


def _audit(tmp_path: Path) -> AuditStore:
    return AuditStore(f"sqlite:///{tmp_path / 'audit.db'}")


def _call(audit: AuditStore, run_id: str, action: str, path: str, result: str = "ok", status: int | None = None,
          method: str = "PUT") -> None:
    audit.record(run_id=run_id, action=action, kind="call", result=result, mutating=True, flow=FLOW.name,
                 request=RequestSummary(method=method, path=path, status=status), error="x" if result == "error" else None)


def test_so_far_lists_completed_steps_and_what_changed_offsets_counted_per_cluster(tmp_path):
    audit = _audit(tmp_path)
    for step in ("params.validate", "failover.precheck", "failover.translate"):
        audit.record(run_id="r1", action=f"step.{step}", kind="step", result="ok" if "pre" in step else "noop")
    audit.record(run_id="r1", action="step.connector.stop", kind="step", result="error", details={"role": "checkpoint"})
    audit.record(run_id="r1", action="step.connector.stop", kind="step", result="ok", details={"role": "source"})
    for g in ("g1", "g2", "g3"):
        _call(audit, "r1", "groups.alter_offsets", f"kafka://B/groups/{g}", method="AlterConsumerGroupOffsets")
    _call(audit, "r1", "connector.stop", f"/connectors/{quote(FLOW.connector('source'), safe='')}/stop")
    _call(audit, "r1", "connector.stop", f"/connectors/{quote(FLOW.connector('checkpoint'), safe='')}/stop",
          "error", 500)
    _call(audit, "r1", "connector.stop", f"/connectors/{quote(FLOW.connector('heartbeat'), safe='')}/stop",
          "error", 409)  # refused by Connect: nothing happened
    _call(audit, "other", "connector.pause", f"/connectors/{quote(FLOW.connector('heartbeat'), safe='')}/pause")
    got = so_far(audit, "r1", [FLOW])
    assert got.completed == ["params.validate", "failover.precheck", "failover.translate", "connector.stop (source)"]
    assert got.changed == ["offsets of 3 group(s) written on B", "A->B source: stop accepted by Connect"]
    assert got.maybe_changed == ["A->B checkpoint: stop asked"]
    assert got.lines() == ["steps completed: params.validate, failover.precheck, failover.translate, "
                           "connector.stop (source)",
                           "already changed: offsets of 3 group(s) written on B, A->B source: stop accepted by Connect",
                           "may have changed (the call failed after it was sent): A->B checkpoint: stop asked"]


def test_an_incomplete_move_report_says_what_was_done_and_changed(tmp_path):
    audit = _audit(tmp_path)
    rb = Runbook(RunInfo(run_id="r2"), audit)
    audit.record(run_id="r2", action="step.failover.write_offsets", kind="step", result="ok")
    _call(audit, "r2", "groups.alter_offsets", "kafka://B/groups/g1", method="AlterConsumerGroupOffsets")
    text = render_report(move_report(rb, None, AT, {"direction": "failover", "flow": "A->B"}))
    assert text.splitlines() == [
        "failover of A->B (None, translation=None): incomplete (the offsets are not both written and the flow "
        "stopped): RTO not measured",
        "  steps completed: failover.write_offsets",
        "  already changed: offsets of 1 group(s) written on B"]
    dry = render_report(move_report(Runbook(RunInfo(run_id="r3"), audit, dry_run=True), None, AT,
                                    {"direction": "failover", "flow": "A->B"}))
    assert dry.splitlines() == ["failover of A->B (None, translation=None): dry run, nothing changed: RTO not measured"]


def test_at_failure_with_connect_unreachable_falls_back_to_the_last_known_state_and_never_shows_secrets(tmp_path):
    audit = _audit(tmp_path)
    source = quote(FLOW.connector("source"), safe="")
    _call(audit, "r4", "connector.pause", f"/connectors/{source}/pause")
    audit.record(run_id="r0", action="step.connector.pause", kind="step", result="ok", flow=FLOW.name,
                 details={"role": "checkpoint", "connector": FLOW.connector("checkpoint")},
                 state_after={"connector": "RUNNING", "tasks": ["RUNNING"]})

    class Dead:
        topology = TOPOLOGY

        def connect_settings(self, alias: str) -> ConnectSettings:
            return ConnectSettings(url=f"http://ops:s3cr3t@{CLOSED}", name=alias)

        def kafka_config(self, alias: str) -> dict:
            return {}

    rb = Runbook(RunInfo(run_id="r4"), audit)
    text = at_failure(rb, Clients(Dead()), [FLOW], set_state_rerun("PAUSED"), deadline_s=1)
    lines = text.splitlines()
    assert lines[0] == "where run r4 stands:"
    assert lines[1] == "  steps completed: none"
    assert lines[2] == "  already changed: A->B source: pause accepted by Connect"
    assert lines[3].startswith(f"  flow A->B: Connect cluster B (http://{CLOSED}) could not be read now (gave up after ")
    assert "last error: cannot reach Connect: [Errno 111] Connection refused); last known: source PAUSED (pause " \
           "accepted, run r4, " in lines[3]
    assert "checkpoint RUNNING (seen by run r0, " in lines[3] and lines[3].endswith("heartbeat unknown")
    assert lines[4] == ("  a re-run of this task (clear it) will: on A->B, pause checkpoint; then read heartbeat and "
                        "pause it unless it is PAUSED (its state is unknown); and leave source (PAUSED already) (said "
                        "from the last known state: it reads each part first)")
    assert "s3cr3t" not in text and "ops" not in text


@settings(max_examples=25, deadline=None)
@given(name=st.text(min_size=1, max_size=600).filter(lambda s: s.strip() != ""))
def test_a_connector_of_any_name_is_named_unencoded_bounded_and_on_one_line(tmp_path_factory, name):
    audit = _audit(tmp_path_factory.mktemp("a"))
    _call(audit, "r5", "connector.stop", f"/connectors/{quote(name, safe='')}/stop")
    got = so_far(audit, "r5")
    [line] = got.changed
    assert line == f"connector {shown(name)}: stop accepted by Connect"
    assert len(line) <= ECHO_LIMIT + 80 and "\n" not in "".join(got.lines())


def _pause(rb: Runbook, role: str, fail: Exception | None = None) -> None:
    """A step pausing one of FLOW's connectors as the replication backend's do (it notes connector and role)."""
    name = FLOW.connector(role)

    def do() -> None:
        if fail is not None:
            raise fail

    with rb.step("connector.pause", FLOW.name) as step:
        step.note(connector=name, role=role)
        step.mutate("connector.pause", do, method="PUT", path=f"/connectors/{quote(name, safe='')}/pause",
                    precondition=f"{name} is RUNNING", expect=WorkerState(state="PAUSED"))


def test_a_step_that_fails_after_its_task_changed_something_says_so_in_its_own_error(tmp_path):
    """A pause whose source connector was paused before Connect's 500 storm outlasted the deadline: the failed
    task's own error — the first thing the on-call reads, the step's error in the audit trail, the flows API's
    answer — says what the task had already changed, right after the error and before its fix."""
    audit = _audit(tmp_path)
    rb = Runbook(RunInfo(run_id="r6"), audit)
    _pause(rb, "source")
    last = ConnectServerError("storm", status=500, where=Where(url="http://b:8083", cluster="B",
                                                               call="PUT pause of connector A->B.Mirror…"))
    storm = ConnectDeadlineExceeded(last, attempts=5, deadline_s=2)
    with pytest.raises(ConnectDeadlineExceeded) as exc:
        _pause(rb, "checkpoint", storm)
    lines = str(exc.value).splitlines()
    assert lines[0].startswith("Connect cluster B (http://b:8083): PUT pause of connector A->B.Mirror… gave up "
                               "after ")
    assert lines[1] == "  before it failed, it had already changed: A->B source: pause accepted by Connect"
    assert lines[2].startswith("  fix: ")
    [step] = [e for e in audit.events(run_id="r6") if e.kind == "step" and e.result == "error"]
    assert step.error == str(exc.value)
    # Its retry (a new attempt of the same task: the source is PAUSED already, so it changes nothing itself)
    # still says what the task changed — the first attempt did.
    retry = Runbook(RunInfo(run_id="r6"), audit)
    with pytest.raises(ConnectDeadlineExceeded) as again:
        _pause(retry, "checkpoint", ConnectDeadlineExceeded(last, attempts=5, deadline_s=2))
    assert str(again.value).splitlines()[1] == lines[1]
    # A task that changed nothing says nothing of it; an error that is not mirrorbook's gets it as a note.
    fresh = Runbook(RunInfo(run_id="r7"), audit)
    with pytest.raises(ConnectDeadlineExceeded) as untouched:
        _pause(fresh, "source", ConnectDeadlineExceeded(last, attempts=5, deadline_s=2))
    assert "already changed" not in str(untouched.value)
    _pause(fresh, "heartbeat")
    with pytest.raises(KeyError) as other:
        _pause(fresh, "checkpoint", KeyError("boom"))
    assert other.value.__notes__ == ["before it failed, it had already changed: A->B heartbeat: pause accepted by "
                                     "Connect"]


def test_what_a_failed_task_changed_is_bounded_and_counts_groups(tmp_path):
    """A thousand group writes are one line; a dozen changes more are counted, not listed."""
    audit = _audit(tmp_path)
    rb = Runbook(RunInfo(run_id="r8"), audit)
    with pytest.raises(RuntimeError) as exc, rb.step("failover.write_offsets", FLOW.name) as step:
        step.mutate_all([Mutation("groups.alter_offsets", lambda: None, method="AlterConsumerGroupOffsets",
                                  path=f"kafka://B/groups/g{i}", precondition="EMPTY", expect=WorkerState(state="x"))
                         for i in range(1000)], concurrency=8)
        for i in range(20):
            step.mutate("connector.stop", lambda: None, method="PUT", path=f"/connectors/c{i}/stop",
                        precondition="RUNNING", expect=WorkerState(state="STOPPED"))
        raise RuntimeError("then it failed")
    [note] = exc.value.__notes__
    assert note.startswith("before it failed, it had already changed: offsets of 1000 group(s) written on B, "
                           'connector "c0": stop accepted by Connect') and note.endswith("(+9 more)"), note
