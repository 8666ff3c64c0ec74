"""What an SRE reads under stress, rendered by headless Chromium on the e2e `airflow standalone`, each kept as
a screenshot in .artifacts/:

- Airflow's own trigger form of mm2_failover: Dry run right after Flow, the translation field saying what
  `auto` means; and that this Airflow cannot fill it from a URL (the reason for the plugin's forms);
- mm2_failover's graph: six named groups (prepare, translate, approve, write, prove, switch) of named steps;
- a flow's runbook link: the runbook's form with THAT flow filled in and fixed, every other field at the
  runbook's default; submitted, it triggers the DAG as the user and opens the run in Airflow — here an
  mm2_offsets reset, dry run, whose plan says what a reset does to the replication;
- a form post that is wrong, forbidden or from another site: a precise answer, and no run.
"""

from __future__ import annotations

import json
from html import unescape
from pathlib import Path
from urllib.parse import quote, unquote

import httpx
import pytest

from mirrorbook.runbooks.params import OFFSETS_EFFECTS
from mirrorbook.trigger import AirflowApi, Credentials, new_run_id
from tests.e2e.browser import Page, chromium, keep, page, session_cookie
from tests.e2e.conftest import E2E

pytestmark = [pytest.mark.e2e, pytest.mark.airflow, pytest.mark.integration]
GROUPS = {"prepare": ["precheck", "wait_groups_inactive", "wait_replication_drained", "warm_proof"],
          "translate": ["translate_offsets"], "approve": ["approve_plan"],
          "write": ["write_offsets", "read_back_offsets"],
          "prove": ["group_parity", "record_parity"],
          "switch": ["stop_flow", "confirm_flow_stopped", "start_reverse_flow"]}
AUTO = "auto: precise when planned, mm2 when unplanned"
RESET_EFFECT = "a reset re-copies every retained record from the start (duplicates on the target)"
TRIGGER = "[data-testid=trigger-dag-button]"


def _cookie(e2e: E2E, user: str = "admin") -> list[dict]:
    return session_cookie(e2e.url, e2e.token(user))


def _airflow_fields(tab: Page) -> list[list[str]]:
    """Airflow's trigger form as shown: [label, help text] of each field, in DOM order."""
    return tab.evaluate("[...document.querySelectorAll('[data-scope=field][data-part=root]')].map(r => ["
                        "((r.querySelector('label') || {}).textContent || '').replace('*', '').trim(),"
                        "((r.querySelector('[data-part=helper-text]') || {}).textContent || '').trim()])")


def _open_airflow_trigger_form(tab: Page, url: str) -> None:
    tab.navigate(url)
    tab.wait_for(f"!!document.querySelector('{TRIGGER}')", timeout_s=120, what="Airflow's trigger button")
    tab.evaluate(f"document.querySelector('{TRIGGER}').click()")
    tab.wait_for("!!document.querySelector('#element_flow')", timeout_s=120, what="the trigger form's flow field")


def test_airflows_failover_form_has_dry_run_right_after_the_flow_and_says_what_auto_means(e2e: E2E, tmp_path: Path):
    assert chromium(), "chromium is missing: run scripts/bootstrap.sh --test (installs Debian's chromium)"
    first, ops = e2e.topology.flows[0].name, e2e.ops.flow.name
    asked = f"flow={quote(ops)}&conf={quote(json.dumps({'flow': ops}))}"
    with page(_cookie(e2e)) as tab:
        # Airflow 3.3 has no trigger route and reads no form values from the URL: a link cannot fill its form.
        tab.navigate(f"{e2e.url}/dags/mm2_failover/trigger/single?{asked}")
        tab.wait_for("document.body.innerText.includes('Page Not Found')", timeout_s=120, what="Airflow's 404 page")
        _open_airflow_trigger_form(tab, f"{e2e.url}/dags/mm2_failover?{asked}")
        flow_value = tab.evaluate("document.querySelector('#element_flow').value")
        names = tab.evaluate("[...document.querySelectorAll('[name^=element_]')].map(e => e.name)")
        fields = _airflow_fields(tab)
        tab.screenshot(tmp_path / "trigger-form-mm2_failover.png")

    keep(tmp_path / "trigger-form-mm2_failover.png")
    assert flow_value == first != ops  # the URL's flow ignored: the form shows the topology's first flow
    assert names[:3] == ["element_flow", "element_dry_run", "element_mode"]
    labels = [label for label, _ in fields]
    assert labels.index("Dry run") == labels.index("Flow") + 1
    assert dict(fields)["Offset translation"].startswith(AUTO + ";")


def test_the_failover_graph_shows_six_named_groups_of_named_steps(e2e: E2E, tmp_path: Path):
    nodes = ("Object.fromEntries([...document.querySelectorAll('.react-flow__node')]"
             ".map(n => [n.dataset.id, n.innerText]))")
    with page(_cookie(e2e), size=(1800, 800)) as tab:
        tab.navigate(f"{e2e.url}/dags/mm2_failover")
        tab.wait_for("!!document.querySelector('[aria-label^=\"Show Graph\"]')", timeout_s=120, what="the graph button")
        tab.evaluate("document.querySelector('[aria-label^=\"Show Graph\"]').click()")
        tab.wait_for("!!document.querySelector('.react-flow__node[data-id=switch]')", timeout_s=120, what="the graph")
        collapsed = tab.evaluate(nodes)
        tab.screenshot(tmp_path / "graph-mm2_failover.png")
        tab.evaluate("document.querySelector('[aria-label=\"Collapse Details Panel\"]')?.click()")
        tab.evaluate("document.querySelector('[aria-label=\"Expand all task groups\"]').click()")
        tab.wait_for("!!document.querySelector('.react-flow__node[data-id=translate_offsets]')", what="groups opened")
        tab.wait_for("document.querySelectorAll('.react-flow__node').length > 20", what="every step drawn")
        expanded = tab.evaluate(nodes)
        tab.screenshot(tmp_path / "graph-mm2_failover-expanded.png")

    for shot in ("graph-mm2_failover.png", "graph-mm2_failover-expanded.png"):
        keep(tmp_path / shot)
    steps = ["validate_params", "lock_flow", *GROUPS, "unlock_flow", "report"]
    assert sorted(collapsed) == sorted(steps)  # the groups closed: the run reads as ten boxes
    for group, tasks in GROUPS.items():
        label = collapsed[group].split("\n")
        assert label[0] == group and "Task Group" in label and f"+ {len(tasks)} Task" in collapsed[group]
        for task in tasks:  # opened: each step under its own name
            assert expanded[task].split("\n")[0] == task
    assert set(expanded) >= {*steps, *(t for ts in GROUPS.values() for t in ts)}


def _run(e2e: E2E, dag_id: str, run_id: str) -> dict | None:
    with e2e.client() as api:
        got = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}")
    return got.json() if got.status_code == 200 else None


def test_a_flows_runbook_link_opens_its_form_filled_with_that_flow_and_triggers_it_as_the_user(e2e: E2E,
                                                                                               tmp_path: Path):
    flow, alias = e2e.ops.flow, e2e.ops.alias
    assert flow.name != e2e.topology.flows[0].name  # what Airflow's bare form would have filled in
    connector = flow.connector("source")
    writes_before = len([c for c in e2e.proxy.calls() if c.method != "GET"])
    with page(_cookie(e2e)) as tab:
        tab.navigate(f"{e2e.url}/mirrorbook/page/flows/{alias}/B")
        tab.click_through("#runbooks a[data-dag=mm2_failover]")  # a runbook this flow never ran
        failover = {"at": tab.evaluate("location.pathname"),
                    "flow": tab.evaluate("document.querySelector('#flow').innerText"),
                    "names": tab.evaluate("[...document.querySelectorAll('#runbook-form [name]')].map(e => e.name)"),
                    "auto": tab.evaluate("document.querySelector('tr[data-field=translation] .help').innerText")}
        tab.screenshot(tmp_path / "runbook-form-mm2_failover.png")

        tab.navigate(f"{e2e.url}/mirrorbook/page/flows/{alias}/B")
        tab.click_through("#runbooks a[data-dag=mm2_offsets]")
        action_help = tab.evaluate("document.querySelector('tr[data-field=action] .help').innerText")
        tab.evaluate("document.querySelector('#f-action').value = 'reset';"
                     "document.querySelector('#f-dry_run').checked = true;"
                     "document.querySelector('#f-stop_first').checked = true;"
                     "document.querySelector('#f-parity').value = 'off'")
        tab.screenshot(tmp_path / "runbook-form-mm2_offsets-filled.png")
        tab.click_through("#trigger")  # posts the form; Airflow's run page opens in the whole window
        landed = tab.evaluate("location.pathname")
        run_id = unquote(landed.rsplit("/", 1)[-1])
        tab.wait_for(f"document.body.innerText.includes({json.dumps(run_id)})"
                     " && document.body.innerText.includes('validate_params')"  # its tasks are listed
                     " && !document.body.innerText.includes('nav.home')",  # and its words translated
                     timeout_s=120, what="Airflow's page of the run")
        tab.screenshot(tmp_path / "runbook-form-mm2_offsets-run.png")

    with AirflowApi(e2e.url, timeout_s=60) as api:
        api.login(Credentials(username="admin", password=e2e.password("admin")))
        done = api.wait("mm2_offsets", run_id, timeout_s=300, interval_s=1)

    with page(_cookie(e2e)) as tab:  # the next visit starts from the runbook's defaults: the reset is not replayed
        tab.navigate(f"{e2e.url}/mirrorbook/page/flows/{alias}/B")
        last_run = tab.evaluate("document.querySelector('#runbooks a[data-dag=mm2_offsets] + a.last-run')"
                                ".getAttribute('href')")
        tab.click_through("#runbooks a[data-dag=mm2_offsets]")
        again = tab.evaluate("['action', 'dry_run', 'stop_first', 'offsets']"
                             ".map(n => document.querySelector('#f-' + n))"
                             ".map(e => e.type === 'checkbox' ? e.checked : e.value)")

    for shot in ("runbook-form-mm2_failover.png", "runbook-form-mm2_offsets-filled.png",
                 "runbook-form-mm2_offsets-run.png"):
        keep(tmp_path / shot)
    assert failover["at"] == f"/mirrorbook/page/flows/{alias}/B/runbooks/mm2_failover"
    assert failover["flow"] == flow.name and "flow" not in failover["names"]
    assert failover["names"][:2] == ["dry_run", "mode"] and failover["auto"].startswith(AUTO)
    assert OFFSETS_EFFECTS["source"] in action_help and RESET_EFFECT in action_help

    assert landed.startswith("/dags/mm2_offsets/runs/mirrorbook__"), landed
    assert done.state == "success", f"{run_id}: {done.state}\n{e2e.airflow.log_tail(2000)}"
    run = _run(e2e, "mm2_offsets", run_id)
    assert run["triggering_user_name"] == "admin"
    assert run["conf"] == {"flow": flow.name, "dry_run": True, "connector": "source", "action": "reset",
                           "offsets": None, "stop_first": True, "snapshot_id": None, "parity": "off",
                           "spark_connect": None, "approval": "default"}
    planned = {e.action: e for e in e2e.audit.events(run_id=run_id) if e.kind == "call" and e.result == "planned"}
    assert RESET_EFFECT in planned["offsets.reset"].details["precondition"]  # the dry-run plan says it too
    assert e2e.audit.count_mutating(run_id) == 0
    assert len([c for c in e2e.proxy.calls() if c.method != "GET"]) == writes_before  # a dry run: no write sent
    with httpx.Client(**e2e.stack.connect_settings("B").httpx_kwargs()) as connect:
        assert connect.get(f"/connectors/{quote(connector, safe='')}/status").json()["connector"]["state"] == "RUNNING"
    assert last_run == f"/dags/mm2_offsets/runs/{quote(run_id, safe='')}"
    assert again == ["list", False, False, ""]


def _post(e2e: E2E, dag_id: str, fields: dict[str, str], user: str = "admin",
          headers: dict[str, str] | None = None) -> httpx.Response:
    with e2e.client(user) as api:
        return api.post(f"/mirrorbook/page/flows/{e2e.ops.alias}/B/runbooks/{dag_id}", data=fields,
                        headers=headers or {})


def test_a_wrong_forbidden_or_cross_site_form_post_is_answered_precisely_and_triggers_nothing(e2e: E2E):
    defaults = {"mode": "planned", "translation": "auto", "groups": "", "drain_timeout": "600", "max_lag": "0",
                "parity": "off", "spark_connect": "", "dry_run": "on"}
    cases = [  # (user, fields, headers, status, what the answer says)
        ("admin", {**defaults, "drain_timeout": "ten"}, None, 422, "Invalid parameter `drain_timeout`"),
        ("admin", {**defaults, "dryrun": "on"}, None, 422, "unknown parameter 'dryrun' — did you mean 'dry_run'?"),
        ("admin", {**defaults, "flow": e2e.topology.flows[0].name}, None, 422, "`flow` is fixed by the form"),
        ("ops", defaults, None, 502, "Airflow answered 403"),  # a viewer: Airflow itself refuses the trigger
        ("admin", defaults, {"Sec-Fetch-Site": "cross-site"}, 403, "accepted from this site's own page only"),
        ("admin", defaults, {"Origin": "http://elsewhere.example"}, 403, "Origin: http://elsewhere.example"),
    ]
    for user, fields, headers, status, said in cases:
        run_id = new_run_id()
        answer = _post(e2e, "mm2_failover", {**fields, "run_id": run_id}, user, headers)
        text = unescape(answer.text) if status != 403 else answer.json()["detail"]
        assert (answer.status_code, said in text) == (status, True), (user, fields, headers, answer.text[:2000])
        assert _run(e2e, "mm2_failover", run_id) is None, run_id  # nothing was triggered
    assert _post(e2e, "not_a_runbook", defaults).status_code == 404
