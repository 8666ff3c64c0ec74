"""The approval step's policy (topology default, per-run override, dry runs), what the approver is shown, and
how the answer lands in the audit trail. The step under a real Airflow: tests/dags/test_approval.py and
tests/e2e/test_approval_api.py."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from mirrorbook.audit import AuditStore
from mirrorbook.connect.models import ConnectorOffsets
from mirrorbook.mm2.counts import Count
from mirrorbook.runbooks import approval
from mirrorbook.runbooks.approval import Answer, NotApproved
from mirrorbook.runbooks.engine import PlannedCall, RunInfo, Runbook
from mirrorbook.runbooks.params import FailbackParams, FailoverParams, InvalidParams, OffsetsParams, parse
from mirrorbook.runbooks.plan import PlanRow, TranslationPlan
from mirrorbook.topology import Topology, TopologyError, load_topology
from tests.unit.test_params import TOPOLOGY


def with_policy(**policy: str) -> Topology:
    return TOPOLOGY.model_copy(update={"approval": TOPOLOGY.approval.model_copy(update=policy)})


def test_the_topology_requires_approval_unless_it_says_otherwise(tmp_path: Path) -> None:
    assert (TOPOLOGY.approval.failover, TOPOLOGY.approval.failback, TOPOLOGY.approval.offsets) == ("required",) * 3
    path = tmp_path / "t.yaml"
    path.write_text(TOPOLOGY.to_yaml().replace("failover: required", "failover: skip"))
    assert load_topology(path).approval.of("failover") == "skip"
    path.write_text(TOPOLOGY.to_yaml().replace("failover: required", "failover: maybe"))
    with pytest.raises(TopologyError, match="failover"):
        load_topology(path)
    path.write_text(TOPOLOGY.to_yaml().replace("failover: required", "fail_over: skip"))
    with pytest.raises(TopologyError, match="fail_over"):  # a misspelled runbook is refused, not ignored
        load_topology(path)


@pytest.mark.parametrize("model,runbook,extra", [(FailoverParams, "failover", {}),
                                                 (FailbackParams, "failback", {}),
                                                 (OffsetsParams, "offsets", {"action": "reset"})])
def test_default_follows_the_topology_and_a_run_overrides_it(model, runbook, extra) -> None:
    def decide(topology: Topology, **kw) -> tuple[str, str]:
        return parse(model, {"flow": "A->B", **extra, **kw}, topology).approval_decision

    assert decide(TOPOLOGY)[0] == "required"
    assert decide(TOPOLOGY, approval="default") == ("required", f"the topology's approval.{runbook} is required")
    assert decide(with_policy(**{runbook: "skip"})) == ("skip", f"the topology's approval.{runbook} is skip")
    assert decide(with_policy(**{runbook: "skip"}), approval="required")[0] == "required"
    assert decide(TOPOLOGY, approval="skip") == ("skip", "the run's approval parameter is skip")
    # Dry runs never wait, whatever the run or the topology say.
    assert decide(TOPOLOGY, approval="required", dry_run=True)[0] == "skip"


def test_listing_offsets_is_never_held_for_approval() -> None:
    assert parse(OffsetsParams, {"flow": "A->B", "action": "list", "approval": "required"},
                 TOPOLOGY).approval_decision == ("skip", "action=list only reads the offsets")


def test_an_unknown_approval_value_is_refused_naming_the_choices() -> None:
    with pytest.raises(InvalidParams) as exc:
        parse(FailoverParams, {"flow": "A->B", "approval": "yes please"}, TOPOLOGY)
    assert "`approval`" in str(exc.value) and "default, required, skip" in (exc.value.hint or "")
    with pytest.raises(InvalidParams, match="did you mean 'approval'"):
        parse(FailoverParams, {"flow": "A->B", "aproval": "skip"}, TOPOLOGY)


def test_the_form_offers_the_three_choices_defaulting_to_the_topology() -> None:
    from mirrorbook.airflow.forms import form

    p = form(FailoverParams, TOPOLOGY)["approval"]
    assert p.value == "default" and p.schema["enum"] == ["default", "required", "skip"]


@pytest.fixture
def rb(tmp_path: Path) -> Runbook:
    return Runbook(RunInfo(run_id="r1", dag_id="mm2_failover", task_id="approve_plan", user="trigger-bot"),
                   AuditStore(f"sqlite:///{tmp_path / 'audit.db'}"))


def plan(rows: int) -> TranslationPlan:
    return TranslationPlan(flow="A->B", direction="failover", mode="planned", translation="precise", from_cluster="A",
                           to_cluster="B", groups=["g1", "g2"],
                           rows=[PlanRow(group=f"g{i % 2 + 1}", source_topic="orders", target_topic="A.orders",
                                         partition=i, source_offset=100 + i, offset=90 + i, method="precise:next",
                                         re_read=Count.exact(3), skip=Count.exact(0)) for i in range(rows)])


def call(action: str, method: str, path: str, because: str = "ok") -> PlannedCall:
    return PlannedCall(action=action, method=method, path=path, precondition=because)


MOVE_CALLS = [*(call("groups.alter_offsets", "AlterConsumerGroupOffsets", f"kafka://B/groups/g{i}",
                     f"group g{i} is EMPTY with no members on B") for i in range(1, 6)),
              *(call("connector.stop", "PUT", f"/connectors/A->B.{c}/stop") for c in ("Source", "Checkpoint")),
              call("connector.resume", "PUT", "/connectors/B->A.Source/resume")]


def test_calls_are_summarised_one_line_per_kind_in_the_order_they_come() -> None:
    assert approval.summarise(MOVE_CALLS) == [
        "5× AlterConsumerGroupOffsets (groups.alter_offsets): kafka://B/groups/g1, kafka://B/groups/g2, "
        "kafka://B/groups/g3 (+2 more) — because group g1 is EMPTY with no members on B",
        "2× PUT (connector.stop): /connectors/A->B.Source/stop, /connectors/A->B.Checkpoint/stop — because ok",
        "1× PUT (connector.resume): /connectors/B->A.Source/resume — because ok"]


def test_the_lag_is_the_prechecks(rb: Runbook) -> None:
    assert approval.precheck_lag(rb, "failover").startswith("not measured")
    rb.audit.record(run_id="r1", action="step.failover.precheck", kind="step", result="ok", mutating=False,
                    flow="A->B", state_after={"lag_total": 7, "lag_partitions": 2})
    assert approval.precheck_lag(rb, "failover") == "7 record(s) over 2 partition(s), at the precheck"


def test_a_move_request_shows_what_will_change() -> None:
    req = approval.move_request(plan(60), lag="7 record(s) over 2 partition(s), at the precheck", calls=MOVE_CALLS,
                                rpo={"records": 12, "unknown": []}, timeout_s=900)
    assert req.subject == "Approve the failover of A->B (planned): 2 group(s), 60 partition(s), skipped 0"
    for text in ("| groups | 2: g1, g2 |", "| partitions (offsets moved) | 60 committed on B |",
                 "| records re-read | 180 |", "| records skipped | 0 |",
                 "| replication lag | 7 record(s) over 2 partition(s), at the precheck |",
                 "at least 12 record(s) never reached B", "1. 5× AlterConsumerGroupOffsets",
                 "2. 2× PUT (connector.stop)", "3. 1× PUT (connector.resume)",
                 "| g1 | A.orders-0 | 90 | 3 | 0 | precise:next |",
                 "(+10 more row(s) in the plan)", "no answer within 900 s"):
        assert text in req.body, text
    assert req.facts["partitions"] == 60 and req.facts["rpo_records"] == 12 and len(req.facts["calls"]) == 3
    nothing = approval.move_request(plan(1), lag="-", calls=[], rpo=None, timeout_s=60)
    assert "none: everything is already as planned" in nothing.body and "RPO" not in nothing.body


def _offsets(**by_partition: int | None) -> ConnectorOffsets:
    return ConnectorOffsets.model_validate({"offsets": [
        {"partition": {"cluster": "A", "topic": "t", "partition": int(p[1:])}, "offset": None if o is None else {"offset": o}}
        for p, o in by_partition.items()]})


def test_an_offsets_change_lists_each_partition_it_moves() -> None:
    now = _offsets(p0=9, p1=9, p2=5)
    assert approval.offset_changes("alter", now, _offsets(p0=9, p1=4), None) == [
        ('{"cluster": "A", "partition": 1, "topic": "t"}', {"offset": 9}, {"offset": 4})]
    assert [(a, b) for _, a, b in approval.offset_changes("reset", now, None, None)] == [({"offset": 9}, None),
                                                                                        ({"offset": 9}, None),
                                                                                        ({"offset": 5}, None)]
    restored = approval.offset_changes("restore", now, None, _offsets(p0=9, p1=1))  # p2 is not in the snapshot
    assert [(a, b) for _, a, b in restored] == [({"offset": 9}, {"offset": 1}), ({"offset": 5}, None)]
    assert approval.offset_changes("alter", now, _offsets(p0=9), None) == []


def test_an_offsets_request_shows_each_partition_before_and_after() -> None:
    changes = approval.offset_changes("alter", _offsets(p0=9, p1=9), _offsets(p0=9, p1=4), None)
    calls = [call("connector.stop", "PUT", "/connectors/A->B.MirrorSourceConnector/stop"),
             call("offsets.alter", "PATCH", "/connectors/A->B.MirrorSourceConnector/offsets"),
             call("connector.resume", "PUT", "/connectors/A->B.MirrorSourceConnector/resume")]
    req = approval.offsets_request(flow="A->B", part="source", name="A->B.MirrorSourceConnector", action="alter",
                                   state="RUNNING", changes=changes, calls=calls, snapshot_id=None,
                                   effect="re-copies", timeout_s=60)
    assert req.subject == "Approve alter of A->B.MirrorSourceConnector's offsets: 1 partition(s)"
    assert "| cluster=A, partition=1, topic=t | 9 | 4 |" in req.body and "partition=0" not in req.body
    assert "| connector | A->B.MirrorSourceConnector (source; RUNNING) |" in req.body
    assert req.facts["partitions_changed"] == 1 and [c.split(" (")[0] for c in req.facts["calls"]] == [
        "1× PUT", "1× PATCH", "1× PUT"]


def test_a_preview_runs_steps_as_a_dry_run_and_records_nothing(rb: Runbook) -> None:
    """The next steps' calls, planned by the engine's own dry run, on an audit that keeps nothing — yet reads
    the run's real progress (a re-run's plan) and keeps what the steps set for each other."""
    from mirrorbook.replication.expect import ConnectorState

    rb.progress_set("seen", "from the real run")
    got: list[object] = []

    def step(dry: Runbook) -> None:
        assert dry.dry_run and dry.info == rb.info
        got.append(dry.progress_get("seen"))
        dry.progress_set("seen", "set by the preview")
        with dry.step("connector.stop", "A->B") as s:
            s.mutate("connector.stop", lambda: pytest.fail("a preview never calls"), method="PUT",
                     path="/connectors/x/stop", precondition="x is RUNNING",
                     expect=ConnectorState(connector="x", state="STOPPED"))

    calls = approval.preview(rb, [step, step])
    assert [(c.method, c.path, c.precondition) for c in calls] == [("PUT", "/connectors/x/stop", "x is RUNNING")] * 2
    assert got == ["from the real run", "set by the preview"]
    assert rb.audit.events(run_id="r1") == [] and rb.progress_get("seen") == "from the real run"


def test_the_answer_is_recorded_as_the_responders_step(rb: Runbook) -> None:
    at = datetime(2026, 11, 23, 17, 0, tzinfo=timezone.utc)
    approval.record_answer(rb, "A->B", Answer(chosen_options=["Approve"], responded_at=at,
                                              responded_by_user={"id": "7", "name": "alice"}))
    with pytest.raises(NotApproved, match=r"rejected by bob: the run ends here; nothing was changed\."):
        approval.record_answer(rb, "A->B", Answer(chosen_options=["Reject"], responded_at=at,
                                                  responded_by_user={"id": "8", "name": "bob"}))
    with pytest.raises(NotApproved, match="Nobody answered"):  # Airflow resumes a timed-out request with "Reject"
        approval.record_answer(rb, "A->B", Answer(chosen_options=["Reject"], responded_at=at, timedout=True))
    # What a new try of the step finds: the newest answer (a timeout here, no responder) — it stands.
    latest = approval.recorded_answer(rb)
    assert latest is not None and latest.timedout and latest.chosen_options == ["Reject"] and not latest.approved
    decisions = rb.audit.events(run_id="r1", action="step.approval.decision")
    assert [(e.user, e.result, e.details["answer"], e.details["triggered_by"]) for e in decisions] == [
        ("alice", "noop", ["Approve"], "trigger-bot"), ("bob", "refused", ["Reject"], "trigger-bot"),
        ("trigger-bot", "refused", ["Reject"], "trigger-bot")]
    assert decisions[2].details["timed_out"] is True


def test_a_new_try_knows_the_run_asked_already(rb: Runbook) -> None:
    assert not approval.requested(rb) and approval.recorded_answer(rb) is None
    approval.record_request(rb, "A->B", approval.Request(subject="s", body="b", facts={}),
                            ("required", "the run's approval parameter is required"), 60)
    assert approval.requested(rb) and approval.recorded_answer(rb) is None


def test_a_rejection_after_a_change_does_not_claim_nothing_changed(rb: Runbook) -> None:
    from mirrorbook.audit.models import RequestSummary

    rb.audit.record(run_id="r1", action="connector.stop", kind="call", result="ok", mutating=True, flow="A->B",
                    request=RequestSummary(method="PUT", path="/connectors/x/stop"))
    with pytest.raises(NotApproved, match="1 mutating call"):
        approval.record_answer(rb, "A->B", Answer(chosen_options=["Reject"], responded_by_user={"name": "bob"}))


def test_the_docs_approval_policy_is_one_the_topology_accepts() -> None:
    import yaml

    from tests import docs

    blocks = [yaml.safe_load(b) for b in docs.yaml_blocks("docs/operating.md")]
    [policy] = [b["approval"] for b in blocks if set(b) == {"approval"}]
    topology = Topology.model_validate({**TOPOLOGY.model_dump(), "approval": policy})
    assert (topology.approval.of("offsets"), topology.approval.timeout_s) == ("skip", 1800)


# What may run before a human approved: reading, waiting, planning. Everything else of the runbook comes after.
BEFORE_APPROVAL = {"validate_params", "lock_flow", "precheck", "wait_groups_inactive", "wait_replication_drained",
                   "warm_proof", "translate_offsets", "capture_group_offsets"}


@pytest.mark.airflow
def test_no_task_that_changes_anything_can_start_before_the_approval() -> None:
    """The guard is the graph: in each runbook that asks, every task that is not a read-only step before it is
    downstream of approve_plan (so a rejection leaves them all unstarted), and the plan is known before it."""
    from airflow.dag_processing.dagbag import DagBag

    from tests.conftest import REPO

    bag = DagBag(dag_folder=str(REPO / "dags"))
    asked = {d: dag for d, dag in bag.dags.items() if "approve_plan" in dag.task_ids}
    assert set(asked) == {"mm2_failover", "mm2_failback", "mm2_offsets"}
    for dag_id, dag in asked.items():
        gate = dag.get_task("approve_plan")
        after = gate.get_flat_relative_ids(upstream=False)
        before = gate.get_flat_relative_ids(upstream=True)
        assert set(dag.task_ids) - after - {"approve_plan"} <= BEFORE_APPROVAL, dag_id
        assert before <= BEFORE_APPROVAL and {"validate_params", "lock_flow"} <= before, dag_id
        assert ("translate_offsets" if dag_id != "mm2_offsets" else "capture_group_offsets") in before, dag_id
        assert gate.response_timeout.total_seconds() == 3600 and gate.execution_timeout.total_seconds() == 300
