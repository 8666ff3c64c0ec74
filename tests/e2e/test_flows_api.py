"""The plugin's KIP-1144 flows API, served by Airflow's API server, over HTTP: shapes and links, real
state changes on Connect, Connect's offsets semantics, the audit trail, and Airflow's auth."""

from __future__ import annotations

import json
import subprocess

import httpx
import pytest

from mirrorbook.connect import ConnectClient
from mirrorbook.connect.wait import wait_for
from tests import docs
from tests.e2e.conftest import E2E, SECRET, SECRET_CONNECTOR_KEY
from tests.helpers import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.airflow, pytest.mark.integration]
API = "/mirrorbook"
CLASSES = ["MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector"]
FLAGS = {"enabled", "ready", "allConnectorsRunning", "sourceTaskRunning"}


def _connect_states(e2e: E2E, flow) -> dict[str, str]:
    with ConnectClient(e2e.stack.connect_settings("B")) as c:
        return {role: c.status(name).connector.state for role, name in flow.connectors.items()}


def test_calls_without_a_valid_airflow_identity_are_refused(e2e: E2E):
    with e2e.client(user=None) as anon:
        assert anon.get(f"{API}/").status_code == 401
        assert anon.get(f"{API}/page").status_code == 401
        assert anon.put(f"{API}{e2e.ops.path}/pause").status_code == 401
        forged = anon.get(f"{API}/", headers={"Authorization": "Bearer not-a-jwt"})
        assert forged.status_code == 403
    with e2e.client(user="ops") as viewer:  # SimpleAuthManager role "viewer": may read, may not act
        assert viewer.get(f"{API}/").status_code == 200
        refused = viewer.put(f"{API}{e2e.ops.path}/pause")
        assert refused.status_code == 403 and "mm2_pause_resume" in refused.json()["detail"]
        assert viewer.patch(f"{API}{e2e.ops.path}/offsets", json={"offsets": []}).status_code == 403
    assert _connect_states(e2e, e2e.ops.flow) == dict.fromkeys(("source", "checkpoint", "heartbeat"), "RUNNING")


def test_the_schema_and_its_viewers_need_an_airflow_identity_and_the_schema_leads_to_the_api(e2e: E2E):
    with e2e.client(user=None) as anon:
        for path in ("/openapi.json", "/docs", "/redoc"):
            assert anon.get(f"{API}{path}").status_code == 401, path
    with e2e.client(user="ops") as viewer:  # reading the schema needs what reading flows needs
        schema, docs, redoc = (viewer.get(f"{API}{p}") for p in ("/openapi.json", "/docs", "/redoc"))
    assert (schema.status_code, docs.status_code, redoc.status_code) == (200, 200, 200)
    assert f'"{API}/openapi.json"' in docs.text.replace("'", '"') and f"{API}/openapi.json" in redoc.text
    body = schema.json()
    assert body["servers"] == [{"url": API}]
    paths = body["paths"]
    assert {"/", "/{source}/{target}", "/{source}/{target}/connectors", "/{source}/{target}/pause",
            "/{source}/{target}/resume", "/{source}/{target}/offsets", "/page",
            "/page/flows/{source}/{target}"} <= set(paths)
    assert not {"/openapi.json", "/docs", "/redoc"} & set(paths)
    assert {"get", "patch", "delete"} <= set(paths["/{source}/{target}/offsets"])
    patch_body = paths["/{source}/{target}/offsets"]["patch"]["requestBody"]["content"]["application/json"]["schema"]
    assert patch_body["required"] == ["offsets"]
    # Usable as given: every GET it lists, on a real flow (and a runbook of it), under its server URL, answers 200.
    with e2e.client() as api:
        for path, operations in paths.items():
            if "get" in operations:
                url = body["servers"][0]["url"] + path.format(source=e2e.ops.alias, target="B", dag_id="mm2_pause_resume")
                assert api.get(url).status_code == 200, url


def test_hostile_input_through_airflow_gets_connects_error_shape_and_bounded_echoes(e2e: E2E):
    patches_before, puts_before = len(e2e.proxy.calls("PATCH")), len(e2e.proxy.calls("PUT"))
    with e2e.client() as api:
        deep = api.patch(f"{API}{e2e.ops.path}/offsets", content="[" * 100_000 + "]" * 100_000)
        unknown = api.get(f"{API}/{'Z' * 5_000}/B")
        expand = api.get(f"{API}{e2e.ops.path}/connectors", params={"expand": "x" * 5_000})
        encoded = api.put(f"{API}/{e2e.ops.alias}%2FB/pause")
        no_route = api.post(f"{API}{e2e.ops.path}/pause")
    assert deep.status_code == 400 and deep.json() == {
        "error_code": 400, "message": "`request body` is nested more than 6 levels deep"}
    assert unknown.status_code == 404 and unknown.json()["message"].startswith("Unknown flow ")
    assert len(unknown.text) <= 2_100  # bounded, whatever the topology's wording
    assert expand.status_code == 400 and "(5000 chars)" in expand.json()["message"] and len(expand.text) < 600
    assert encoded.json() == {"error_code": 400, "message": "Ambiguous URI path separator"}
    assert no_route.json() == {"error_code": 405, "message": "HTTP 405 Method Not Allowed"}
    assert e2e.proxy.calls("PATCH")[patches_before:] == [] and e2e.proxy.calls("PUT")[puts_before:] == []
    assert _connect_states(e2e, e2e.ops.flow) == dict.fromkeys(("source", "checkpoint", "heartbeat"), "RUNNING")


def test_the_docs_flows_command_prints_a_flows_state(e2e: E2E):
    """docs/operating.md's command, as written (this server's address put in): the state of A->B, as the API
    itself answers it."""
    block = docs.block("tests/e2e/test_flows_api.py::test_the_docs_flows_command_prints_a_flows_state")
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.text.replace("http://localhost:8080", e2e.url)],
                          capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin",
                                                                           "TOKEN": e2e.token()})
    assert done.returncode == 0, done.stderr
    with e2e.client() as api:
        state = api.get(f"{API}/").json()["flows"]["A->B"]["state"]
    assert json.loads(done.stdout) == state and state in ("REPLICATING", "CONCERNING", "NOT_REPLICATING", "DISABLED")


def test_overview_flow_and_connectors_have_the_kip_shape_links_and_no_secret(e2e: E2E):
    with e2e.client() as api:
        root = api.get(f"{API}/").json()
        detail = api.get(f"{API}{e2e.ops.path}").json()
        connectors = api.get(f"{API}{e2e.ops.path}/connectors", params=[("expand", "info"), ("expand", "status")])
        unknown = api.get(f"{API}/NOPE/B")

    assert set(root["flows"]) >= {"A->B", "B->A", e2e.ops.flow.name, e2e.failover.flow.name}
    ops = root["flows"][e2e.ops.flow.name]
    assert ops["state"] == "REPLICATING" and set(ops["detailedState"]) == FLAGS and all(ops["detailedState"].values())
    assert (ops["source"], ops["target"]) == (e2e.ops.alias, "B") and ops["kafkaClusterId"]
    assert ops["links"] == {"herder [GET]": f"{API}{e2e.ops.path}"}
    # Every connection of the secured stack holds a SASL password: no cluster's address is published.
    assert root["clusters"]["A"] == root["clusters"][e2e.ops.alias] == "hidden"
    assert e2e.stack.brokers["A"].bootstrap not in str(root)

    assert detail["state"] == "REPLICATING" and e2e.ops.remote in detail["replicatedTopics"]
    assert detail["MirrorSourceConnector"] == "RUNNING" and detail["MirrorSourceConnectorTasksRunning"] >= 1
    base = f"{API}{e2e.ops.path}"
    assert detail["links"] == {"connectors [GET]": f"{base}/connectors", "pause [PUT]": f"{base}/pause",
                               "resume [PUT]": f"{base}/resume", "offsets [GET]": f"{base}/offsets",
                               "offsets modification [PATCH]": f"{base}/offsets",
                               "offsets reset [DELETE]": f"{base}/offsets"}

    assert connectors.status_code == 200 and list(connectors.json()) == CLASSES
    source = connectors.json()["MirrorSourceConnector"]
    assert source["info"]["name"] == e2e.ops.flow.connector("source")
    assert source["info"]["config"]["source.cluster.alias"] == e2e.ops.alias
    assert source["status"]["connector"]["state"] == "RUNNING"
    assert source["info"]["config"][SECRET_CONNECTOR_KEY] == "***"
    for answer in (str(root), str(detail), connectors.text):
        assert SECRET not in answer

    assert unknown.status_code == 404
    message = unknown.json()["message"]
    assert message.startswith("Unknown flow ") and "NOPE->B" in message and "A->B" in message


def test_pause_and_resume_change_connect_only_where_needed_and_are_audited_with_the_user(e2e: E2E):
    flow = e2e.ops.flow
    with e2e.client() as api:
        paused = api.put(f"{API}{e2e.ops.path}/pause").json()
        assert _connect_states(e2e, flow) == dict.fromkeys(("source", "checkpoint", "heartbeat"), "PAUSED")
        again = api.put(f"{API}{e2e.ops.path}/pause").json()
        resumed = api.put(f"{API}{e2e.ops.path}/resume").json()

    assert paused["state"] == "NOT_REPLICATING" and paused["mutations"] == 3
    assert list(paused["connectors"]) == CLASSES and paused["links"]["resume [PUT]"] == f"{API}{e2e.ops.path}/resume"
    assert again["mutations"] == 0 and {c["result"] for c in again["connectors"].values()} == {"noop"}
    assert resumed["state"] == "REPLICATING" and resumed["mutations"] == 3
    assert _connect_states(e2e, flow) == dict.fromkeys(("source", "checkpoint", "heartbeat"), "RUNNING")

    calls = [e for e in e2e.audit.events(run_id=paused["auditRunId"]) if e.kind == "call"]
    # Write-ahead: each call's intent is on record before the call, its outcome after, linked to it.
    assert [(e.action, e.user, e.result) for e in calls] == [("connector.pause", "admin", "intent"),
                                                              ("connector.pause", "admin", "ok")] * 3
    assert [e.details["intent"] for e in calls[1::2]] == [e.event_id for e in calls[0::2]]
    assert {e.request.path.split("/")[2] for e in calls} == {
        name.replace(">", "%3E") for _, name in flow.connectors.items()}
    assert e2e.audit.count_mutating(again["auditRunId"]) == 0
    assert [e.user for e in e2e.audit.events(run_id=resumed["auditRunId"]) if e.kind == "call"] == ["admin"] * 6  # intent + outcome


def test_offsets_keep_connects_semantics_and_no_refused_change_reaches_connect(e2e: E2E):
    flow, name = e2e.ops.flow, e2e.ops.flow.connector("source")
    body = {"offsets": [{"partition": {"cluster": e2e.ops.alias, "topic": e2e.ops.topic, "partition": 0},
                         "offset": {"offset": 1}}]}
    patches_before = len(e2e.proxy.calls("PATCH"))
    with e2e.client() as api:
        listed = api.get(f"{API}{e2e.ops.path}/offsets").json()
        running = api.patch(f"{API}{e2e.ops.path}/offsets", json=body)
        bad = api.patch(f"{API}{e2e.ops.path}/offsets", json={"offsets": [{"partition": {
            "cluster": e2e.ops.alias, "topic": e2e.ops.topic, "partition": 0}, "offset": {"offset": -5}}]})
        reset_running = api.delete(f"{API}{e2e.ops.path}/offsets")
    # Connect itself, asked directly, refuses the same PATCH with the same words.
    with httpx.Client(**e2e.stack.connect_settings("B").httpx_kwargs()) as connect:  # HTTPS, basic auth
        connects_own = connect.patch(f"/connectors/{name.replace('>', '%3E')}/offsets", json=body).json()

    assert {(e["partition"]["topic"], e["partition"]["partition"]) for e in listed["offsets"]} >= {
        (e2e.ops.topic, 0), (e2e.ops.topic, 1)}
    assert listed["links"]["offsets modification [PATCH]"] == f"{API}{e2e.ops.path}/offsets"
    assert running.status_code == 400 and running.json() == connects_own == {
        "error_code": 400, "message": connects_own["message"]}
    assert "must be in the STOPPED state" in connects_own["message"]
    assert bad.status_code == 400 and "cannot be negative" in bad.json()["message"]
    assert reset_running.status_code == 400 and reset_running.json()["message"] == connects_own["message"]
    assert e2e.proxy.calls("PATCH")[patches_before:] == [] and e2e.proxy.calls("DELETE", r"/offsets$") == []

    # Stopped, the same PATCH goes through: snapshot first, audited with the user, visible in GET.
    with ConnectClient(e2e.stack.connect_settings("B")) as c:
        c.stop(name)
        wait_for(c, name, "STOPPED", timeout_s=60)
    with e2e.client() as api:
        altered = api.patch(f"{API}{e2e.ops.path}/offsets", json=body)
        after = api.get(f"{API}{e2e.ops.path}/offsets").json()["offsets"]
        resumed = api.put(f"{API}{e2e.ops.path}/resume").json()
    assert altered.status_code == 200, altered.text
    assert altered.json()["message"] == "The offsets for this connector have been altered successfully"
    assert {"partition": body["offsets"][0]["partition"], "offset": {"offset": 1}} in after
    snap = e2e.audit.snapshot(altered.json()["snapshotId"])
    assert snap.subject == name and snap.run_id == altered.json()["auditRunId"]
    calls = [e for e in e2e.audit.events(run_id=altered.json()["auditRunId"]) if e.kind == "call" and e.result != "intent"]
    assert [(e.action, e.user, e.request.method) for e in calls] == [("offsets.alter", "admin", "PATCH")]
    assert resumed["state"] in ("REPLICATING", "NOT_REPLICATING")
    eventually(lambda: _connect_states(e2e, flow)["source"] == "RUNNING", timeout=60, what="source RUNNING")
    trail = json.dumps([e.model_dump(mode="json") for e in e2e.audit.events(flow=flow.name)])
    assert SECRET not in trail
