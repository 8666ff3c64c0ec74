"""The Connect REST client against the real worker: KIP-875 behaviours, retries and error mapping.

Faults are injected by a local proxy in front of the real Connect (tests/faultproxy.py); nothing
here mocks HTTP.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from mirrorbook.connect import AsyncConnectClient, ConnectClient, ConnectSettings
from mirrorbook.connect.errors import (
    ConnectDeadlineExceeded,
    ConnectorNotFound,
    ConnectorNotStopped,
    ConnectServerError,
    ConnectTimeout,
    ConnectUnreachable,
)
from mirrorbook.connect.models import ConnectorOffsets
from mirrorbook.connect.retry import RetryPolicy
from mirrorbook.connect.wait import WaitTimeout, wait_for
from mirrorbook.devstack.workload import produce
from mirrorbook.kafka.types import TP
from tests.faultproxy import Fault, FaultProxy
from tests.helpers import eventually, seqs

pytestmark = pytest.mark.integration

NOT_STOPPED = ("Connectors must be in the STOPPED state before their offsets can be modified. This can be done "
               "for the specified connector by issuing a 'PUT' request to the '/connectors/{}/stop' endpoint")


@pytest.fixture
def client(connect_b_url):
    with ConnectClient(connect_b_url, retry=RetryPolicy(deadline_s=10)) as c:
        yield c


def test_unknown_connector_is_404(client):
    for call in (lambda: client.status("no-such"), lambda: client.get_offsets("no-such"),
                 lambda: client.stop("no-such"), lambda: client.reset_offsets("no-such")):
        with pytest.raises(ConnectorNotFound) as err:
            call()
        assert err.value.status == 404
    assert "no-such" in str(err.value)


def test_offsets_refused_unless_stopped_with_connects_message(client, scratch_flow):
    name = scratch_flow.flow.connector("source")
    body = ConnectorOffsets.model_validate({"offsets": [
        {"partition": {"cluster": scratch_flow.alias, "topic": scratch_flow.topic, "partition": 0},
         "offset": {"offset": 0}}]})
    with pytest.raises(ConnectorNotStopped) as running:
        client.alter_offsets(name, body)
    assert running.value.status == 400
    assert running.value.message == NOT_STOPPED.format(name)

    client.pause(name)
    wait_for(client, name, "PAUSED", timeout_s=30)
    for call in (lambda: client.alter_offsets(name, body), lambda: client.reset_offsets(name)):
        with pytest.raises(ConnectorNotStopped):
            call()


def test_stop_resume_idempotent_and_stopped_means_no_tasks(client, scratch_flow):
    name = scratch_flow.flow.connector("source")
    client.stop(name)
    client.stop(name)  # idempotent
    st = wait_for(client, name, "STOPPED", timeout_s=30)
    assert st.connector.state == "STOPPED" and st.tasks == []
    client.stop(name)
    assert client.status(name).tasks == []
    client.resume(name)
    client.resume(name)
    wait_for(client, name, "RUNNING", timeout_s=30, min_tasks=1)


def test_alter_get_reset_and_mirroring_restarts_from_altered_offset(client, scratch_flow, bootstrap_a, bootstrap_b,
                                                                    admin_b):
    name = scratch_flow.flow.connector("source")
    produce(bootstrap_a, [scratch_flow.topic], 10)
    remote0 = TP(scratch_flow.remote, 0)
    eventually(lambda: scratch_flow.remote in admin_b.topics() and admin_b.high_watermarks([remote0])[remote0] >= 10,
               what="10 records mirrored")
    eventually(lambda: any(e.offset == {"offset": 9} for e in client.get_offsets(name).offsets), timeout=30,
               what="source connector committed offset 9")

    client.stop(name)
    wait_for(client, name, "STOPPED", timeout_s=30)
    part = {"cluster": scratch_flow.alias, "topic": scratch_flow.topic, "partition": 0}
    msg = client.alter_offsets(name, ConnectorOffsets.model_validate(
        {"offsets": [{"partition": part, "offset": {"offset": 4}}]}))
    assert msg == "The offsets for this connector have been altered successfully"
    got = {json.dumps(e.partition, sort_keys=True): e.offset for e in client.get_offsets(name).offsets}
    assert got[json.dumps(part, sort_keys=True)] == {"offset": 4}

    client.resume(name)
    wait_for(client, name, "RUNNING", timeout_s=30, min_tasks=1)
    # The task resumes at offset 4 + 1: records 5..9 are mirrored a second time.
    eventually(lambda: admin_b.high_watermarks([remote0])[remote0] >= 15, what="records re-mirrored")
    assert seqs(bootstrap_b, remote0, 0, 15) == list(range(10)) + list(range(5, 10))

    client.stop(name)
    wait_for(client, name, "STOPPED", timeout_s=30)
    assert client.reset_offsets(name) == "The offsets for this connector have been reset successfully"
    assert client.reset_offsets(name) == "The offsets for this connector have been reset successfully"
    assert client.get_offsets(name).offsets == []


def test_wait_for_timeout_message_is_precise(client, scratch_flow):
    name = scratch_flow.flow.connector("heartbeat")
    with pytest.raises(WaitTimeout) as err:
        wait_for(client, name, "STOPPED", timeout_s=1.0, poll_s=0.2)
    text = str(err.value)
    assert name in text and "STOPPED" in text and "tasks == []" in text and "connector=RUNNING" in text


# -- retries and error mapping through the fault proxy ---------------------------------------------

def test_409_is_retried_until_success(connect_b_url):
    with FaultProxy(connect_b_url, [Fault(409, count=3, path="/status$", message="rebalance in progress")]) as proxy:
        with ConnectClient(proxy.url, retry=RetryPolicy(deadline_s=10, initial_s=0.05)) as c:
            st = c.status("A->B.MirrorSourceConnector")
    assert st.connector.state == "RUNNING"
    calls = proxy.calls("GET", "/status$")
    assert [x.status for x in calls] == [409, 409, 409, 200]


def test_5xx_retried_only_for_calls_safe_to_repeat(connect_b_url, scratch_flow):
    name = scratch_flow.flow.connector("heartbeat")
    with FaultProxy(connect_b_url, [Fault(500, count=2, method="PUT", path="/pause$"),
                                    Fault(500, count=1, method="POST", path="/restart$")]) as proxy:
        with ConnectClient(proxy.url, retry=RetryPolicy(deadline_s=10, initial_s=0.05)) as c:
            c.pause(name)  # idempotent: retried through two 500s
            with pytest.raises(ConnectServerError):
                c.restart(name)  # not idempotent: one attempt only
            c.resume(name)
    assert [x.status for x in proxy.calls("PUT", "/pause$")] == [500, 500, 202]
    assert len(proxy.calls("POST", "/restart$")) == 1


def test_retries_stop_at_the_deadline_with_backoff(connect_b_url):
    with FaultProxy(connect_b_url, [Fault(409, count=10_000, path="/status$")]) as proxy:
        with ConnectClient(proxy.url, retry=RetryPolicy(deadline_s=1.5, initial_s=0.1, jitter_s=0)) as c:
            t0 = time.monotonic()
            with pytest.raises(ConnectDeadlineExceeded) as err:
                c.status("A->B.MirrorSourceConnector")
            elapsed = time.monotonic() - t0
    assert 1.3 <= elapsed <= 1.6  # the last backoff is shortened so that the last attempt starts by 1.4 s
    n = len(proxy.calls("GET"))
    assert 4 <= n <= 6  # 0.1, 0.2, 0.4, then what is left ... doubling, not a tight loop
    assert f"gave up after {n} attempts within 1.5s; last error: [409] injected fault" in str(err.value)


def test_client_timeout_and_unreachable_are_typed(connect_b_url):
    with FaultProxy(connect_b_url, [Fault(0, count=1, path="/status$", delay_s=1.5)]) as proxy:
        with ConnectClient(ConnectSettings(url=proxy.url, timeout_s=0.5), retry=RetryPolicy(max_attempts=1)) as c:
            with pytest.raises(ConnectTimeout) as timeout:
                c.status("A->B.MirrorSourceConnector")
    assert "GET status of connector A->B.MirrorSourceConnector: no answer within 0.5s (ReadTimeout)" in str(
        timeout.value)
    with ConnectClient("http://localhost:9", retry=RetryPolicy(deadline_s=0.5, initial_s=0.1)) as c:
        with pytest.raises(ConnectDeadlineExceeded) as err:
            c.list()
    assert isinstance(err.value.last, ConnectUnreachable)
    assert "cannot reach Connect" in str(err.value)


def test_patch_offsets_validation_500_is_not_retried(connect_b_url, scratch_flow, client):
    """Connect reports a bad MM2 payload as a 500; repeating it cannot help."""
    name = scratch_flow.flow.connector("source")
    client.stop(name)
    wait_for(client, name, "STOPPED", timeout_s=30)
    bad = ConnectorOffsets.model_validate({"offsets": [{"partition": {"topic": "x", "partition": 0},
                                                        "offset": {"offset": 1}}]})
    with FaultProxy(connect_b_url) as proxy:
        with ConnectClient(proxy.url, retry=RetryPolicy(deadline_s=5, initial_s=0.05)) as c:
            with pytest.raises(ConnectServerError) as err:
                c.alter_offsets(name, bad)
    assert "is missing the 'cluster' key" in err.value.message
    assert len(proxy.calls("PATCH")) == 1


def test_basic_auth_sent_and_password_never_shown(connect_b_url):
    settings = ConnectSettings(url=connect_b_url, username="ops", password="s3cr3t-pw")
    with FaultProxy(connect_b_url) as proxy:
        with ConnectClient(settings.model_copy(update={"url": proxy.url})) as c:
            c.root()
            assert "s3cr3t-pw" not in repr(c) and "s3cr3t-pw" not in repr(c.settings) and "s3cr3t-pw" not in str(
                c.settings)
    assert proxy.calls("GET")[0].authorized


def test_async_client_and_wait(connect_b_url, scratch_flow):
    name = scratch_flow.flow.connector("checkpoint")

    async def run() -> str:
        with FaultProxy(connect_b_url, [Fault(409, count=1, path="/status$")]) as proxy:
            async with AsyncConnectClient(proxy.url, retry=RetryPolicy(deadline_s=10, initial_s=0.05)) as c:
                from mirrorbook.connect.wait import async_wait_for

                await c.stop(name)
                st = await async_wait_for(c, name, "STOPPED", timeout_s=30)
                await c.resume(name)
                await async_wait_for(c, name, "RUNNING", timeout_s=30)
                return st.connector.state

    assert asyncio.run(run()) == "STOPPED"
