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
from mirrorbook.runbooks.engine import RunInfo, Runbook
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


def test_a_move_request_shows_what_will_change(rb: Runbook) -> None:
    rb.audit.record(run_id="r1", action="step.failover.precheck", kind="step", result="ok", mutating=False,
                    flow="A->B", state_after={"lag_total": 7, "lag_partitions": 2})
    req = approval.move_request(rb, plan(60), via="A->B", other_flow="B->A", rpo={"records": 12, "unknown": []},
                                timeout_s=900)
    assert req.subject == "Approve the failover of A->B (planned): 2 group(s), 60 partition(s), skipped 0"
    for text in ("| groups | 2: g1, g2 |", "| partitions (offsets moved) | 60 committed on B |",
                 "| records re-read | 180 |", "| records skipped | 0 |",
                 "| replication lag | 7 record(s) over 2 partition(s), at the precheck |",
                 "at least 12 record(s) never reached B", "1. commit the offsets of 2 group(s) on B",
                 "2. stop the connectors of A->B", "3. start B->A", "| g1 | A.orders-0 | 90 | 3 | 0 | precise:next |",
                 "(+10 more row(s) in the plan)", "no answer within 900 s"):
        assert text in req.body, text
    assert req.facts["partitions"] == 60 and req.facts["rpo_records"] == 12


def _offsets(**by_partition: int | None) -> ConnectorOffsets:
    return ConnectorOffsets.model_validate({"offsets": [
        {"partition": {"cluster": "A", "topic": "t", "partition": int(p[1:])}, "offset": None if o is None else {"offset": o}}
        for p, o in by_partition.items()]})


def test_an_offsets_request_shows_each_partition_before_and_after(rb: Runbook) -> None:
    common = dict(flow="A->B", connector="A->B.MirrorSourceConnector", snapshot_id=None, effect="re-copies",
                  timeout_s=60)
    alter = approval.offsets_request(rb, action="alter", state="RUNNING", stop_first=True, current=_offsets(p0=9, p1=9),
                                     requested=_offsets(p0=9, p1=4), **common)
    assert alter.facts["partitions_changed"] == 1
    assert "| cluster=A, partition=1, topic=t | 9 | 4 |" in alter.body and "partition=0" not in alter.body
    assert alter.facts["calls"] == ["stop A->B.MirrorSourceConnector (it is RUNNING; stop_first)",
                                    "PATCH the offsets of A->B.MirrorSourceConnector (1 partition(s)), then read them back",
                                    "put A->B.MirrorSourceConnector back to RUNNING"]
    reset = approval.offsets_request(rb, action="reset", state="STOPPED", stop_first=False,
                                     current=_offsets(p0=9, p1=9), requested=None, **common)
    assert reset.facts["partitions_changed"] == 2 and "| 9 | (none) |" in reset.body
    assert reset.facts["calls"] == ["DELETE the offsets of A->B.MirrorSourceConnector (2 partition(s)), then read them back"]


def test_the_answer_is_recorded_as_the_responders_step(rb: Runbook) -> None:
    at = datetime(2026, 11, 23, 17, 0, tzinfo=timezone.utc)
    approval.record_answer(rb, "A->B", Answer(chosen_options=["Approve"], responded_at=at,
                                              responded_by_user={"id": "7", "name": "alice"}))
    with pytest.raises(NotApproved, match=r"rejected by bob: the run ends here; nothing was changed\."):
        approval.record_answer(rb, "A->B", Answer(chosen_options=["Reject"], responded_at=at,
                                                  responded_by_user={"id": "8", "name": "bob"}))
    with pytest.raises(NotApproved, match="Nobody answered"):  # Airflow resumes a timed-out request with "Reject"
        approval.record_answer(rb, "A->B", Answer(chosen_options=["Reject"], responded_at=at, timedout=True))
    decisions = rb.audit.events(run_id="r1", action="step.approval.decision")
    assert [(e.user, e.result, e.details["answer"], e.details["triggered_by"]) for e in decisions] == [
        ("alice", "noop", ["Approve"], "trigger-bot"), ("bob", "refused", ["Reject"], "trigger-bot"),
        ("trigger-bot", "refused", ["Reject"], "trigger-bot")]
    assert decisions[2].details["timed_out"] is True


def test_a_rejection_after_a_change_does_not_claim_nothing_changed(rb: Runbook) -> None:
    from mirrorbook.audit.models import RequestSummary

    rb.audit.record(run_id="r1", action="connector.stop", kind="call", result="ok", mutating=True, flow="A->B",
                    request=RequestSummary(method="PUT", path="/connectors/x/stop"))
    with pytest.raises(NotApproved, match="1 mutating call"):
        approval.record_answer(rb, "A->B", Answer(chosen_options=["Reject"], responded_by_user={"name": "bob"}))


def test_the_readmes_approval_policy_is_one_the_topology_accepts() -> None:
    import re

    import yaml

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", readme, flags=re.S)]
    [policy] = [b["approval"] for b in blocks if set(b) == {"approval"}]
    topology = Topology.model_validate({**TOPOLOGY.model_dump(), "approval": policy})
    assert (topology.approval.of("offsets"), topology.approval.timeout_s) == ("skip", 1800)
