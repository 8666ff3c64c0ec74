"""The plugin page, rendered by headless Chromium with an Airflow session cookie (as the Airflow UI's
external view loads it), kept as a screenshot; and its link in Airflow's navigation."""

from __future__ import annotations

import re
import shutil
from html import unescape
from pathlib import Path

import pytest

from tests.e2e.browser import chromium, render
from tests.e2e.conftest import E2E, SECRET

pytestmark = [pytest.mark.e2e, pytest.mark.airflow, pytest.mark.integration]
REPO = Path(__file__).resolve().parents[2]
KEPT = REPO / ".artifacts" / "plugin-page.png"


def _rows(dom: str, table: str) -> list[str]:
    body = re.search(rf'<table id="{table}">.*?<tbody>(.*?)</tbody>', dom, re.S)
    assert body, f"no table {table} in the page"
    return [unescape(re.sub(r"<[^>]+>", " ", r)) for r in re.findall(r"<tr[^>]*>(.*?)</tr>", body.group(1), re.S)]


def test_page_renders_flows_drills_and_audit_in_headless_chromium(e2e: E2E, tmp_path: Path):
    assert chromium(), "chromium is missing: run scripts/bootstrap.sh --test (installs Debian's chromium)"
    e2e.audit.record_artifact("drill-report", "e2e-drill-1", "/reports/drill-e2e-drill-1.html",
                              {"rto_s": 12.5, "skipped": 0, "re_read": 7, "path": "/reports/drill-e2e-drill-1.html"})
    with e2e.client() as api:
        flows = api.get("/mirrorbook/").json()["flows"]
        plugin = next(p for p in api.get("/api/v2/plugins").json()["plugins"] if p["name"] == "mirrorbook")
    shot = tmp_path / "plugin-page.png"

    dom = render(f"{e2e.url}/mirrorbook/page", [{"name": "_token", "value": e2e.token("admin"), "url": e2e.url,
                                                 "httpOnly": True}], shot)

    KEPT.parent.mkdir(exist_ok=True)
    shutil.copyfile(shot, KEPT)
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert SECRET not in dom
    rows = _rows(dom, "flows")
    for name, flow in flows.items():  # every flow, with the state the API reports
        assert any(name in r and flow["state"] in r for r in rows), (name, flow["state"], rows)
    drill = next(r for r in _rows(dom, "drills") if "e2e-drill-1" in r)
    assert "12.5" in drill and " 0 " in drill and " 7 " in drill
    newest = e2e.audit.events(limit=1, newest_first=True)
    events = _rows(dom, "events")
    if newest:  # the other e2e tests ran first: the newest event is theirs, made as admin
        assert newest[0].action in events[0] and (newest[0].user or "") in events[0]
    else:
        assert "the audit trail is empty" in events[0]
    assert {"name": "MM2 flows", "href": "/mirrorbook/page", "url_route": "mirrorbook"}.items() <= \
        plugin["external_views"][0].items()
