"""The approval step under dag.test(): a failover waits in AWAITING_INPUT for a human, showing its plan before
anything is written; approved, it runs, and the approver is in mirrorbook's audit. (Rejection, with the proof
that nothing was written, runs on a real `airflow standalone`: tests/e2e/test_approval_api.py.)

dag.test() never answers a Human-in-the-loop request itself: it keeps the run alive until a response recorded
in the same metadata DB flips the task back to SCHEDULED. The response here is recorded by Airflow's own REST
handler for `PATCH …/hitlDetails` (called in-process, as the API server would call it for a signed-in user);
the HTTP round trip through a real `airflow standalone` is tests/e2e/test_approval_api.py's.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import pytest

from mirrorbook.devstack.workload import GroupSpec, load
from tests.helpers import wait_mirrored

pytestmark = [pytest.mark.airflow, pytest.mark.integration]


class Responder(threading.Thread):
    """Answers the first approval request of `dag_id` with `option`, as `user`; keeps what it was shown."""

    def __init__(self, dag_id: str, option: str, user: str, timeout_s: float = 240) -> None:
        super().__init__(daemon=True)
        self.dag_id, self.option, self.user, self.timeout_s = dag_id, option, user, timeout_s
        self.shown: dict[str, Any] = {}
        # Airflow's API modules are imported here, on the caller's thread: imported by this thread while the
        # main one configures Airflow's ORM mappers (dag.test()), the two deadlock on Python's import locks.
        self._api()
        self.start()

    @staticmethod
    def _api() -> Any:
        from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
        from airflow.api_fastapi.core_api.datamodels.hitl import UpdateHITLDetailPayload
        from airflow.api_fastapi.core_api.routes.public.hitl import update_hitl_detail
        from airflow.models.hitl import HITLDetail
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.session import create_session
        from airflow.utils.state import TaskInstanceState

        return (SimpleAuthManagerUser, UpdateHITLDetailPayload, update_hitl_detail, HITLDetail, TaskInstance,
                create_session, TaskInstanceState)

    def run(self) -> None:
        from sqlalchemy import select

        (SimpleAuthManagerUser, UpdateHITLDetailPayload, update_hitl_detail, HITLDetail, TaskInstance,
         create_session, TaskInstanceState) = self._api()
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            with create_session() as session:
                row = session.execute(
                    select(TaskInstance.run_id, TaskInstance.task_id, HITLDetail.subject, HITLDetail.body)
                    .join(HITLDetail, HITLDetail.ti_id == TaskInstance.id)
                    .where(TaskInstance.dag_id == self.dag_id,
                           TaskInstance.state == TaskInstanceState.AWAITING_INPUT)).first()
                if row is not None:
                    self.shown = {"run_id": row.run_id, "subject": row.subject, "body": row.body}
                    update_hitl_detail(dag_id=self.dag_id, dag_run_id=row.run_id, task_id=row.task_id,
                                       update_hitl_detail_payload=UpdateHITLDetailPayload(chosen_options=[self.option]),
                                       user=SimpleAuthManagerUser(username=self.user, role="admin"), session=session)
                    return
            time.sleep(0.5)


@pytest.fixture
def two_groups(dag_scratch, bootstrap_a, admin_a, admin_b):
    s = dag_scratch
    groups = [f"{s.topic}-g0", f"{s.topic}-g1"]
    load(bootstrap_a, [s.topic], 2, 30, [GroupSpec(name=g, position=p) for g, p in zip(groups, ["end", "end-7"])])
    wait_mirrored(admin_a, admin_b, s.topic, f"{s.alias}.{s.topic}")
    return s, groups


def test_an_approved_failover_runs_and_names_who_approved_it(run_dag, two_groups, admin_b):
    scratch, groups = two_groups
    conf = {"flow": scratch.flow.name, "groups": f"{re.escape(scratch.topic)}-g.*", "drain_timeout": 60,
            "max_lag": 0, "approval": "default"}  # the topology's: required

    alice = Responder("mm2_failover", "Approve", "alice")
    assert admin_b.committed_offsets(groups) == {g: {} for g in groups}
    approved = run_dag("mm2_failover", conf)
    alice.join(5)

    # What alice was shown: the plan, before anything was written.
    assert alice.shown["run_id"] == approved.run_id
    assert alice.shown["subject"].startswith(f"Approve the failover of {scratch.flow.name} (planned): 2 group(s), "
                                             "4 partition(s), skipped 0")
    for text in ("| records skipped | 0 |", "2× AlterConsumerGroupOffsets (groups.alter_offsets)",
                 "3× PUT (connector.stop)", f"| {groups[0]} |"):
        assert text in alice.shown["body"], alice.shown["body"]
    [request] = approved.events(action="step.approval.request")
    assert request.details["facts"]["partitions"] == 4
    assert request.details["because"] == "the topology's approval.failover is required"
    before = [e for e in approved.events() if e.kind == "call" and e.mutating and e.seq < request.seq]
    assert before == []  # the request came before the first mutation

    assert approved.state == "success", approved.failure() or approved.task_states()
    [decision] = approved.events(action="step.approval.decision")
    assert (decision.user, decision.result, decision.details["answer"], decision.details["triggered_by"]) == \
        ("alice", "noop", ["Approve"], "dag_test")
    committed = admin_b.committed_offsets(groups)
    assert all(committed[g] for g in groups), committed
    assert approved.report()["plan"]["partitions"] == 4
