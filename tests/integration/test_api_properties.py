"""Hostile input against every endpoint of the plugin's app: arbitrary path segments (unicode, huge,
encoded slashes), query parameters and JSON bodies (keys, sizes, types, depth) get a 2xx, or a 4xx in
Connect's `{"error_code", "message"}` shape — never a 5xx, never an answer that grows with the input —
and change nothing: no call but a GET ever reaches Connect.

The app runs in-process (Starlette's TestClient) on the session devstack: flows that exist are read on
the real Connect workers (through logging proxies) and the real brokers. Airflow's authentication is
overridden here, and only here, so that hypothesis can send thousands of requests quickly: that Airflow
guards every route (401/403, the schema included) is proven by tests/e2e/test_flows_api.py against a
real `airflow standalone`, and tests/unit/test_api_pages.py checks that every route depends on a guard
(`test_every_route_the_schema_and_its_viewers_included_needs_an_airflow_guard`).

The mutating routes take no query parameter, and PUT …/pause|resume and DELETE …/offsets no body: whatever
extra a caller sends is refused by name (400), so a `?dry_run=true` or a `{"dryrun": true}` never makes the
change for real — the connectors' states are compared before and after on the real workers.
"""

from __future__ import annotations

import json
from typing import Any, Iterator
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mirrorbook.airflow.api import auth, context
from mirrorbook.airflow.api.app import create_app
from mirrorbook.airflow.api.errors import MESSAGE_LIMIT
from mirrorbook.airflow.api.models import Caller
from mirrorbook.audit import AuditStore
from mirrorbook.audit.models import CHANGING_RESULTS
from mirrorbook.bounds import PARAM_LIMITS
from mirrorbook.clients import Clients, TopologyResolver
from mirrorbook.connect import ConnectClient
from mirrorbook.devstack.stack import DevStack
from mirrorbook.topology import Topology
from tests.faultproxy import FaultProxy

pytestmark = [pytest.mark.integration]
BOUND = 64 * 1024  # no answer to a bad input is longer than this
MOUNT = "/mirrorbook"
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                          HealthCheck.too_slow])


class Api:
    def __init__(self, client: TestClient, topology: Topology, proxies: list[FaultProxy], audit: AuditStore) -> None:
        self.client, self.topology, self.proxies, self.audit = client, topology, proxies, audit
        self.flows = {(f.source, f.target) for f in topology.flows}
        self.states_before = self.connector_states()

    def send(self, method: str, path: str, **kw: Any) -> Any:
        r = self.client.request(method, f"{MOUNT}{path}", **kw)
        check(r)
        return r

    def changes(self) -> list[str]:
        return [f"{c.method} {c.path}" for p in self.proxies for c in p.log if c.method != "GET"]

    def connector_states(self) -> dict[str, str]:
        out = {}
        for flow in self.topology.flows:
            with ConnectClient(self.topology.connect_clusters[flow.connect_cluster].url) as c:
                out.update({name: c.status(name).connector.state for _, name in flow.connectors.items()})
        return out


def check(r: Any) -> None:
    """The property every answer holds."""
    assert r.status_code < 500, f"{r.status_code}: {r.text[:2000]}"
    assert len(r.content) <= BOUND, f"{r.status_code}: {len(r.content)} bytes"
    if 400 <= r.status_code < 500 and r.status_code not in (401, 403) and r.request.method != "HEAD":
        body = r.json()
        assert set(body) == {"error_code", "message"} and body["error_code"] == r.status_code, body
        assert isinstance(body["message"], str) and body["message"]


@pytest.fixture(scope="module")
def api(devstack: DevStack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    state = devstack.require()
    base = state.topology()
    with FaultProxy(state.workers["A"].url) as proxy_a, FaultProxy(state.workers["B"].url) as proxy_b:
        proxied = {"A": proxy_a.url, "B": proxy_b.url}
        # The stack's own two flows (other tests may add, stop and remove flows of their own meanwhile).
        topology = Topology(clusters={a: base.clusters[a] for a in proxied},
                            connect_clusters={a: base.connect_clusters[a].model_copy(update={"url": url})
                                              for a, url in proxied.items()},
                            flows=[f for f in base.flows if {f.source, f.target} == set(proxied)], groups=base.groups)
        audit = AuditStore(f"sqlite:///{tmp_path_factory.mktemp('api-properties')}/audit.db")
        app = create_app()
        caller = Caller(name="property-test")
        for guard in auth.GUARDS:  # Airflow's auth: proven by the e2e tests, not here (see the docstring)
            app.dependency_overrides[guard] = lambda: caller
        app.dependency_overrides[context.topology] = lambda: topology

        async def clients() -> Clients:  # Airflow connections: none here, the topology's addresses serve
            return Clients(TopologyResolver(topology))

        app.dependency_overrides[context.clients] = clients
        app.dependency_overrides[context.audit_store] = lambda: audit
        with TestClient(app, root_path=MOUNT) as client:
            yield Api(client, topology, [proxy_a, proxy_b], audit)


# -- strategies ------------------------------------------------------------------------------------

URL_SHARE = 15_000  # encoded characters one huge value may take: httpx (like servers) caps a URL at 64 KiB


def _huge(c: str, n: int) -> str:
    return c * max(1, min(n, URL_SHARE // len(quote(c, safe=""))))


huge = st.builds(_huge, st.characters(codec="utf-8"), st.integers(1_000, 100_000))  # a URL is UTF-8
segment = st.one_of(st.text(min_size=1, max_size=40), huge, st.sampled_from(["A", "B", "a", "A ", " B", "A->B", "A%2FB",
                                                                             "A/B", "..", ".", "%00", "page", "flows",
                                                                             "\u202eB", "B\x00", "Ａ"]))
scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=50))
json_values = st.recursive(scalar, lambda kids: st.lists(kids, max_size=5) | st.dictionaries(
    st.text(max_size=30), kids, max_size=5), max_leaves=30)
queries = st.lists(st.tuples(st.text(max_size=30), st.text(max_size=200) | huge), max_size=4)


def deep(depth: int, opener: str = "[") -> str:
    closer = {"[": "]", "{": "}"}[opener]
    if opener == "{":
        return '{"a":' * depth + "1" + "}" * depth
    return opener * depth + closer * depth


raw_bodies = st.one_of(
    json_values.map(json.dumps),
    st.builds(deep, st.integers(PARAM_LIMITS.max_depth, 200_000), st.sampled_from(["[", "{"])),
    st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
    st.builds(lambda n: '{"offsets": [' + ",".join(['{"partition": {"x": 1}, "offset": null}'] * n) + "]}",
              st.integers(1, 3000)),
    st.just('{"offsets": [{"partition": {"cluster": "A", "topic": "t", "partition": ' + "9" * 5000 + "}}]}"),
    st.builds(lambda k: json.dumps({"offsets": [{"partition": {k: "x"}, "offset": {"offset": 1}}]}),
              st.text(min_size=PARAM_LIMITS.max_string - 5, max_size=PARAM_LIMITS.max_string + 5)),
)


def path_of(*segments: str) -> str:
    """The segments as one path, each sent as itself: a bare "." or ".." is a dot-segment the client
    removes (RFC 3986 5.2.4) — "/page/flows/./.." would ask for "/page" — so its dots go percent-encoded."""
    return "/" + "/".join(quote(s, safe="") if s.strip(".") else s.replace(".", "%2E") for s in segments)


@st.composite
def flow_segments(draw: st.DrawFn, api: Api, real: bool = True) -> tuple[str, str]:
    """A flow path: often one that exists (so the real stack is read), else anything at all."""
    if real and draw(st.booleans()):
        return draw(st.sampled_from(sorted(api.flows)))
    return draw(segment), draw(segment)


# -- the properties --------------------------------------------------------------------------------

@SETTINGS
@given(data=st.data())
def test_reads_of_flows_answer_2xx_or_a_bounded_connect_error(api: Api, data: st.DataObject):
    s, t = data.draw(flow_segments(api))
    params = data.draw(queries)
    which = data.draw(st.sampled_from(["", "/connectors", "/offsets"]))
    if which == "/connectors":
        params += data.draw(st.lists(st.tuples(st.just("expand"), st.sampled_from(["info", "status"]) | st.text()),
                                     max_size=3))
    r = api.send("GET", path_of(s, t) + which, params=params)
    if (s, t) in api.flows and r.status_code != 400:
        assert r.status_code == 200, r.text[:500]
    elif (s, t) not in api.flows:
        assert r.status_code in (400, 404), r.text[:500]


@SETTINGS
@given(params=queries, paths=st.lists(segment, max_size=4), method=st.sampled_from(["GET", "POST", "HEAD", "OPTIONS"]))
def test_the_overview_the_pages_the_schema_and_unknown_routes_never_fail(api: Api, params, paths, method):
    fixed = ("/", "/page", "/openapi.json", "/docs", "/redoc", "/metrics")
    for path in (*fixed, path_of(*paths) if paths else "/page"):
        r = api.send(method, path, params=params)
        if method == "GET" and path in fixed:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("application/json" if path in ("/", "/openapi.json")
                                                         else "text/plain" if path == "/metrics" else "text/html")


@SETTINGS
@given(data=st.data())
def test_the_flow_page_answers_for_flows_and_refuses_the_rest(api: Api, data: st.DataObject):
    s, t = data.draw(flow_segments(api))
    r = api.send("GET", "/page/flows" + path_of(s, t), params=data.draw(queries))
    assert r.status_code == (200 if (s, t) in api.flows else 404) or r.status_code == 400, r.text[:300]


@SETTINGS
@given(data=st.data())
def test_pause_and_resume_of_what_is_not_a_flow_change_nothing(api: Api, data: st.DataObject):
    s, t = data.draw(flow_segments(api, real=False))
    assume((s, t) not in api.flows)
    action = data.draw(st.sampled_from(["pause", "resume"]))
    r = api.send("PUT", path_of(s, t) + f"/{action}", params=data.draw(queries),
                 content=data.draw(raw_bodies).encode("utf-8", "surrogatepass"))
    assert r.status_code in (400, 404, 405), r.text[:300]
    assert api.changes() == []


def test_resume_of_a_running_flow_is_a_noop(api: Api):
    s, t = sorted(api.flows)[0]
    for content in (b"", b" \r\n"):  # no body at all, or only whitespace
        r = api.send("PUT", path_of(s, t) + "/resume", content=content)
        assert r.status_code == 200 and r.json()["mutations"] == 0, r.text[:300]
    assert api.changes() == []


# Something extra on a mutating route: at least one query parameter, or a body that is more than whitespace
# (the route would otherwise run for real — it is a real pause of a real flow).
extra_queries = st.lists(st.tuples(st.text(min_size=1, max_size=30), st.text(max_size=200) | huge), min_size=1,
                         max_size=4)
named = st.dictionaries(st.sampled_from(["dry_run", "dryrun", "dry-run", "force", "connectors", "offsets", "flow"])
                        | st.text(max_size=30), json_values, min_size=1, max_size=4).map(json.dumps)
extra_bodies = (named | raw_bodies).map(lambda b: b.encode("utf-8", "surrogatepass")).filter(lambda b: b.strip())
MUTATING = [("PUT", "/pause"), ("PUT", "/resume"), ("DELETE", "/offsets"), ("PATCH", "/offsets")]


def test_anything_extra_on_a_mutating_route_is_refused_by_name_and_changes_nothing(api: Api):
    before = api.connector_states()

    @SETTINGS
    @given(data=st.data())
    def extra_never_mutates(data: st.DataObject) -> None:
        s, t = data.draw(st.sampled_from(sorted(api.flows)))
        method, route = data.draw(st.sampled_from(MUTATING))
        params = data.draw(extra_queries) if method == "PATCH" or data.draw(st.booleans()) else []
        content = data.draw(extra_bodies) if method != "PATCH" and (not params or data.draw(st.booleans())) else \
            data.draw(raw_bodies).encode("utf-8", "surrogatepass")
        r = api.send(method, path_of(s, t) + route, params=params, content=content)
        assert r.status_code == 400, r.text[:300]
        message = r.json()["message"]
        if params:
            assert message.startswith("unknown query parameter '") and message.endswith(
                f": {method} /{{source}}/{{target}}{route} takes no query parameters"), message[-300:]
        else:
            assert message.startswith(f"{method} /{{source}}/{{target}}{route} takes no request body"), message[:300]
        assert len(message) < 1_600, message[:300]  # five keys named at most, each cut at 200 characters
        assert api.changes() == []

    extra_never_mutates()
    assert api.connector_states() == before


def test_a_misspelled_or_extra_key_is_named_with_the_closest_known_one(api: Api):
    s, t = sorted(api.flows)[0]
    flow = path_of(s, t)
    cases = [
        ("PUT", "/pause", {"params": {"dry_run": "true"}},
         "unknown query parameter 'dry_run': PUT /{source}/{target}/pause takes no query parameters"),
        ("PUT", "/pause", {"json": {"dryrun": True}},
         "PUT /{source}/{target}/pause takes no request body: unknown key 'dryrun'"),
        ("PUT", "/resume", {"content": b"true"}, "PUT /{source}/{target}/resume takes no request body (got 4 bytes)"),
        ("DELETE", "/offsets", {"json": {"offsets": []}},
         "DELETE /{source}/{target}/offsets takes no request body: unknown key 'offsets'"),
        ("DELETE", "/offsets", {"params": [("dryrun", "1"), ("dryrun", "2"), ("x" * 5000, "")]},
         f"unknown query parameter 'dryrun'; unknown query parameter '{'x' * 200}'… (5000 chars): "
         "DELETE /{source}/{target}/offsets takes no query parameters"),
        ("PATCH", "/offsets", {"json": {"ofsets": []}},
         "In the offsets body, unknown key 'ofsets' — did you mean 'offsets'?"),
        ("PATCH", "/offsets", {"json": {"offsets": [{"partition": {"cluster": s, "topic": "t", "partition": 0},
                                                     "offset": {"offset": 1}}], "dry_run": True}},
         "In the offsets body, unknown key 'dry_run'"),
        ("PATCH", "/offsets", {"json": {"offsets": [{"partition": {"cluster": s, "topic": "t", "partition": 0},
                                                     "offsets": {"offset": 1}}]}},
         "In the offsets body, entry 0: unknown key 'offsets' — did you mean 'offset'?"),
    ]
    for method, route, kw, message in cases:
        r = api.send(method, flow + route, **kw)
        assert r.json() == {"error_code": 400, "message": message}, (method, route, kw)
    assert api.changes() == []
    assert set(api.connector_states().values()) == {"RUNNING"}


def test_long_keys_nested_in_a_body_are_echoed_bounded(api: Api):
    s, t = sorted(api.flows)[0]
    entry = '{"offsets": [{"partition": %s, "offset": null}]}'
    bodies = [entry % json.dumps({"k" * 999: {"j" * 999: {"i" * 999: "v" * 1001}}}),  # a string too long, 3 keys deep
              entry % json.dumps({"k" * 999: {"j" * 999: {"i" * 1001: 1}}}),  # a key too long
              entry % ('{"%s": %s}' % ("k" * 999, "9" * 5000)),  # an integer Python would not convert
              entry % json.dumps({"\u0000" * 999: [[[1]]]})]  # too deep, under keys that escape 6-fold
    for body in bodies:
        r = api.send("PATCH", path_of(s, t) + "/offsets", content=body)
        assert r.status_code == 400 and len(r.json()["message"]) < 500, r.json()["message"][:300]
    assert api.changes() == []


@SETTINGS
@given(data=st.data())
def test_offsets_changes_with_any_body_are_refused_before_connect(api: Api, data: st.DataObject):
    s, t = data.draw(flow_segments(api))
    method = data.draw(st.sampled_from(["PATCH", "DELETE"]))
    body = data.draw(raw_bodies)
    r = api.send(method, path_of(s, t) + "/offsets", params=data.draw(queries),
                 content=body.encode("utf-8", "surrogatepass"))
    assert 400 <= r.status_code < 500, r.text[:300]  # a running flow, or no flow: refused either way
    assert len(r.json()["message"]) <= MESSAGE_LIMIT + len("… (1234567 chars)")
    assert api.changes() == []


def test_a_body_nested_past_the_limit_names_the_limit(api: Api):
    flow = api.topology.flows[0]
    for body in (deep(100_000), deep(PARAM_LIMITS.max_depth + 1, "{")):
        r = api.send("PATCH", path_of(flow.source, flow.target) + "/offsets", content=body)
        assert r.status_code == 400
        assert r.json()["message"] == f"`request body` is nested more than {PARAM_LIMITS.max_depth} levels deep"


def test_a_body_over_the_size_limit_is_refused_unread(api: Api):
    flow = api.topology.flows[0]
    r = api.send("PATCH", path_of(flow.source, flow.target) + "/offsets",
                 content=b"[" + b" " * PARAM_LIMITS.max_bytes + b"]")
    assert r.status_code == 400 and f"the limit is {PARAM_LIMITS.max_bytes}" in r.json()["message"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: refused while it arrives
        yield b"["
        for _ in range(PARAM_LIMITS.max_bytes // 65536 + 2):
            yield b" " * 65536
        yield b"]"

    r = api.send("PATCH", path_of(flow.source, flow.target) + "/offsets", content=chunks())
    assert r.json() == {"error_code": 400,
                        "message": f"`request body` is more than {PARAM_LIMITS.max_bytes} bytes, the limit"}


def test_echoed_values_are_bounded_and_encoded_slashes_are_refused(api: Api):
    name = "x" * 50_000
    r = api.send("GET", path_of(name, "B"))
    assert r.status_code == 404 and r.json()["message"].startswith("Unknown flow ") and len(r.text) <= 2_100
    r = api.send("GET", path_of("A", "B") + "/connectors", params={"expand": "y" * 10_000})
    assert r.status_code == 400 and "(10000 chars)" in r.json()["message"]
    flow = api.topology.flows[0]
    r = api.send("PUT", path_of(f"{flow.source}/{flow.target}") + "/pause")  # reads as /A/B/pause once decoded
    assert r.status_code == 400 and r.json()["message"] == "Ambiguous URI path separator"
    assert api.changes() == []


def test_nothing_changed_on_connect(api: Api):
    """After every property above (same module, same proxies): only GETs were sent, nothing was changed."""
    assert api.changes() == []
    assert [e for e in api.audit.events(mutating=True) if e.result in CHANGING_RESULTS] == []
    assert api.connector_states() == api.states_before
    assert set(api.states_before.values()) == {"RUNNING"}
