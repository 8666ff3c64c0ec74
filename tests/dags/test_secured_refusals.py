"""Clear refusals on the secured stack, nothing changed (issue #12 item 4).

A wrong SCRAM password, an untrusted CA, a plaintext client on the TLS listener, a principal without the ACL
a step needs; on Connect a wrong basic-auth password, an untrusted CA, plain HTTP to the HTTPS-only worker.
Each fails the first step that needs the access, with a message naming the cluster, the principal (or user)
and what is wrong or the fix — never an empty answer, a timeout or a retry — and the clusters are as they were.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from mirrorbook.connect import ConnectClient
from mirrorbook.devstack.security import _certificates
from mirrorbook.devstack.stack import DevStack
from mirrorbook.devstack.workload import GroupSpec, load
from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.config import client_config
from tests.conftest import ensure_replicating

pytestmark = [pytest.mark.airflow, pytest.mark.integration]


@pytest.fixture(autouse=True)
def replicating(secured: DevStack) -> None:
    """Each test compares the flow's connectors before and after its run: they start settled, every task RUNNING
    (a task still restarting after an earlier test's run would count as a change the refused run never made)."""
    ensure_replicating(secured)


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A CA that signed nothing of the stack's."""
    path = tmp_path_factory.mktemp("other-ca") / "ca.pem"
    path.write_bytes(_certificates("unused")[0])
    return str(path)


def _conn(stack: DevStack, conn_id: str) -> dict[str, Any]:
    return json.loads(stack.connections_path.read_text())[conn_id]


def _use(monkeypatch: pytest.MonkeyPatch, conn_id: str, spec: dict[str, Any]) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(spec))


def _connectors(stack: DevStack, settle_s: float = 60.0) -> dict[str, tuple[str, bool]]:
    """Each A->B connector's state, and whether all its tasks run (how many MM2 gives the checkpoint connector
    is MM2's own business: it starts one once a group qualifies). A RUNNING connector whose tasks are being
    reassigned is read again, up to `settle_s`: the test's own new topic and group make MM2 reconfigure its
    tasks at a moment of its choosing, which no refused run caused. A stopped or paused connector is read as
    it is: that is the change a refused run must never make."""
    state = stack.require()
    deadline = time.monotonic() + settle_s
    with ConnectClient(state.connect_settings("B")) as c:
        while True:
            out = {}
            for name in state.flows()[0].connectors.model_dump().values():
                st = c.status(name)
                out[name] = (st.connector.state, all(t.state == "RUNNING" for t in st.tasks))
            if all(s != "RUNNING" or tasks_run for s, tasks_run in out.values()) or time.monotonic() > deadline:
                return out
            time.sleep(1)


def _kafka_b(stack: DevStack, tag: str) -> dict[str, Any]:
    """What a failover could have changed on B: the groups' offsets, and which of the tag's groups exist."""
    admin = KafkaAdmin(stack.require().kafka_config("B"))
    groups = sorted(g for g in admin.list_groups() if g.startswith(tag))
    return {"groups": groups, "offsets": admin.committed_offsets([f"{tag}-g0"])}


KAFKA_CASES: dict[str, tuple[Callable[[dict, str], dict], list[str]]] = {
    "wrong SCRAM password": (lambda extra, _ca: {**extra, "sasl.password": "not-the-password"},
                             ["Kafka cluster B (", "principal User:mirrorbook", "authentication failed",
                              "fix: correct sasl.username/sasl.password"]),
    "untrusted CA": (lambda extra, ca: {**extra, "ssl.ca.location": ca},
                     ["Kafka cluster B (", "principal User:mirrorbook", "certificate is not trusted",
                      "fix: set ssl.ca.location"]),
    "plaintext to the TLS listener": (lambda extra, _ca: {"bootstrap.servers": extra["bootstrap.servers"]},
                                      ["Kafka cluster B (", "PLAINTEXT client", "the listener expects TLS",
                                       "fix: set security.protocol=SASL_SSL"]),
}
# How each refusal begins (issue #29 item 3): who refused what, before anything else.
KAFKA_LEADS = {"wrong SCRAM password": "Kafka cluster B ({bootstrap}) refused the credentials of principal "
                                       "User:mirrorbook (SCRAM-SHA-512): authentication failed",
               "untrusted CA": "mirrorbook refused the TLS certificate of Kafka cluster B ({bootstrap}): the "
                               "broker's certificate is not trusted by the CA in ssl.ca.location",
               "plaintext to the TLS listener": "Kafka cluster B ({bootstrap}) accepts connections but drops "
                                                "this PLAINTEXT client"}


@pytest.mark.parametrize("case", list(KAFKA_CASES))
def test_a_refused_kafka_client_fails_the_failover_precheck_naming_cluster_principal_and_fix(
        secured, run_dag, monkeypatch, other_ca, case):
    tag = f"rk{uuid.uuid4().hex[:5]}"
    load(secured.require().kafka_config("A"), [f"{tag}-t"], 1, 5, [GroupSpec(name=f"{tag}-g0", position="end")])
    bad, words = KAFKA_CASES[case]
    spec = _conn(secured, "mirrorbook_kafka_b")
    _use(monkeypatch, "mirrorbook_kafka_b", {**spec, "extra": bad(spec["extra"], other_ca)})
    before = (_connectors(secured), _kafka_b(secured, tag))

    run = run_dag("mm2_failover", {"flow": "A->B", "groups": f"{tag}-g.*", "drain_timeout": 30})
    assert run.state == "failed"
    assert run.task_states()["precheck"] == "failed", run.task_states()
    text = run.failure()
    for w in words:
        assert w in text, (w, text)
    assert text.startswith(KAFKA_LEADS[case].format(bootstrap=spec["extra"]["bootstrap.servers"])), text
    assert [e for e in run.events(kind="step") if e.action == "step.failover.precheck"][-1].result == "refused"
    assert run.mutating_calls() == 0
    assert (_connectors(secured), _kafka_b(secured, tag)) == before


def test_a_principal_without_read_on_a_target_group_is_refused_before_any_write(secured, run_dag):
    """The `mirrorbook` principal denied READ on the run's groups on B (a DENY ACL, as a locked-down estate has):
    the precheck names the principal, the right and the groups; nothing is written, nothing is stopped."""
    tag = f"ra{uuid.uuid4().hex[:5]}"
    groups = [f"{tag}-g0", f"{tag}-g1"]
    load(secured.require().kafka_config("A"), [f"{tag}-t"], 1, 5, [GroupSpec(name=g, position="end") for g in groups])
    admin = AdminClient(client_config(secured.require().kafka_config("B")))
    deny = AclBinding(ResourceType.GROUP, tag, ResourcePatternType.PREFIXED, "User:mirrorbook", "*",
                      AclOperation.READ, AclPermissionType.DENY)
    admin.create_acls([deny])[deny].result(timeout=30)
    try:
        before = (_connectors(secured), _kafka_b(secured, tag))
        run = run_dag("mm2_failover", {"flow": "A->B", "groups": f"{tag}-g.*", "drain_timeout": 30})
        assert run.state == "failed"
        assert run.task_states()["precheck"] == "failed", run.task_states()
        text = run.failure()
        assert "Kafka cluster B (" in text and "principal User:mirrorbook lacks READ on consumer group(s) " \
            f"{groups[0]}, {groups[1]}" in text and "nothing was changed" in text, text
        assert "kafka-acls --add --allow-principal User:mirrorbook --operation READ --group" in text
        assert run.mutating_calls() == 0
        assert (_connectors(secured), _kafka_b(secured, tag)) == before
    finally:
        f = AclBindingFilter(ResourceType.GROUP, tag, ResourcePatternType.PREFIXED, "User:mirrorbook", "*",
                             AclOperation.READ, AclPermissionType.DENY)
        admin.delete_acls([f])[f].result(timeout=30)


CONNECT_CASES: dict[str, tuple[Callable[[dict, str], dict], list[str]]] = {
    "wrong basic-auth password": (lambda spec, _ca: {**spec, "password": "not-the-password"},
                                  ["Connect cluster B (https://", "[401]", "basic-auth user 'mirrorbook'",
                                   "fix: set the login/password"]),
    "untrusted CA": (lambda spec, ca: {**spec, "extra": {**spec["extra"], "verify": ca}},
                     ["Connect cluster B (https://", "certificate is not trusted", "fix: set `verify`"]),
    "plain HTTP to the HTTPS worker": (lambda spec, _ca: {**spec, "schema": "http", "extra": {}},
                                       ["Connect cluster B (http://", "answers only HTTPS", "fix: set use_tls=true"]),
}


@pytest.mark.parametrize("case", list(CONNECT_CASES))
def test_a_refused_connect_client_fails_the_first_connect_step_naming_the_fix(secured, run_dag, monkeypatch,
                                                                             other_ca, case):
    bad, words = CONNECT_CASES[case]
    _use(monkeypatch, "mirrorbook_connect_b", bad(_conn(secured, "mirrorbook_connect_b"), other_ca))
    before = _connectors(secured)
    run = run_dag("mm2_pause_resume", {"flow": "A->B", "action": "pause", "connectors": "all"})
    assert run.state == "failed"
    text = run.failure()
    for w in words:
        assert w in text, (w, text)
    assert "gave up after" not in text  # refused at once: a retry cannot fix it
    assert run.mutating_calls() == 0
    assert _connectors(secured) == before


def test_the_secured_stack_refuses_an_unauthenticated_client_outright(secured):
    """`devstack up --secure`'s promise, at the door: no client gets in without credentials."""
    state = secured.require()
    with pytest.raises(Exception) as kafka:
        KafkaAdmin(state.brokers["A"].bootstrap, name="A").list_groups()
    assert "the listener expects TLS" in str(kafka.value)
    anonymous = state.connect_settings("B").model_copy(update={"username": None, "password": None})
    with pytest.raises(Exception) as connect, ConnectClient(anonymous) as c:
        c.list()
    assert "[401]" in str(connect.value) and "without credentials" in str(connect.value)
    assert Path(secured.connections_path).stat().st_mode & 0o077 == 0  # the secrets file: its owner's only


PRECHECK_CASES: dict[str, tuple[Callable[[dict, str], dict], str]] = {
    "wrong basic-auth password": (
        lambda spec, _ca: {**spec, "password": "not-the-password"},
        "Connect cluster B (https://localhost:{port}) refused the credentials of basic-auth user 'mirrorbook' "
        "([401] "),
    "untrusted CA": (
        lambda spec, ca: {**spec, "extra": {**spec["extra"], "verify": ca}},
        "mirrorbook refused the TLS certificate of Connect cluster B (https://localhost:{port}) (TLS handshake "
        "failed: the worker's certificate is not trusted by the CA file in `verify` ({ca})), on GET "),
}


@pytest.mark.parametrize("case", list(PRECHECK_CASES))
def test_a_refused_connect_client_fails_the_failover_precheck_refusal_first_and_the_flow_is_unknown(
        secured, run_dag, monkeypatch, other_ca, failures, case):
    """Issue #29 item 3: the precheck's error leads with who refused what — not with a state the flow is not in —
    then says the flow is UNKNOWN (its connectors could not be read), and its fix is the refusal's, naming the
    connection to correct; the flow, read with the same connection, is UNKNOWN with its KIP flags null."""
    from mirrorbook.airflow.hooks.mirrorbook import MirrorbookHook
    from mirrorbook.mm2.flows import FlowState
    from mirrorbook.replication.mm2_connect_status import flow_status

    tag = f"rp{uuid.uuid4().hex[:5]}"
    load(secured.require().kafka_config("A"), [f"{tag}-t"], 1, 5, [GroupSpec(name=f"{tag}-g0", position="end")])
    bad, first = PRECHECK_CASES[case]
    _use(monkeypatch, "mirrorbook_connect_b", bad(_conn(secured, "mirrorbook_connect_b"), other_ca))
    first = first.format(port=secured.require().workers["B"].rest_port, ca=other_ca)
    errors = failures("mm2_failover")
    before = (_connectors(secured), _kafka_b(secured, tag))
    run = run_dag("mm2_failover", {"flow": "A->B", "groups": f"{tag}-g.*", "drain_timeout": 30})
    assert run.state == "failed" and run.task_states()["precheck"] == "failed", run.task_states()
    text = errors["precheck"]
    assert text.startswith(first), text
    head = text.splitlines()[0]
    assert "; so flow A->B is UNKNOWN: its connectors could not be read. A planned failover must see replication " \
           "drain" in head and "DISABLED" not in text, text
    assert "fix: set the login/password of connection 'mirrorbook_connect_b'" in text if "password" in case else \
        "fix: set `verify` in connection 'mirrorbook_connect_b'" in text, text
    assert run.mutating_calls() == 0 and (_connectors(secured), _kafka_b(secured, tag)) == before
    status = flow_status(MirrorbookHook().clients, secured.require().topology().flow("A->B"))
    assert status.state == FlowState.UNKNOWN and status.errors[0] == status.unreadable.cause
    assert status.kip1144_summary()["detailedState"] == {"enabled": None, "ready": None, "allConnectorsRunning": None,
                                                         "sourceTaskRunning": None}
    assert {c.state for c in status.connectors.values()} == {"UNKNOWN"} and status.unreadable.refused
