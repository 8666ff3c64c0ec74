"""Links. HATEOAS links: the library writes them relative to the flows API root (`/A/B`, as KIP-1144
shows); here they get the prefix the app is mounted under, so a client can follow them as given.
And the pages' links into Airflow's own UI, where the runbooks are triggered."""

from __future__ import annotations

from typing import Any, Protocol
from urllib.parse import quote

from pydantic import BaseModel

from mirrorbook.airflow.api.mount import PREFIX

PAGE = "/page"
# The runbooks a flow's row links to, each with the `flow` parameter every one of them takes.
RUNBOOKS = {"mm2_failover": "failover", "mm2_failback": "failback", "mm2_pause_resume": "pause / resume / stop",
            "mm2_offsets": "offsets", "dr_drill": "DR drill"}


class Endpoints(Protocol):
    source: str
    target: str


def prefixed(links: dict[str, str], base: str) -> dict[str, str]:
    return {rel: f"{base}{href}" for rel, href in links.items()}


def rebased(body: dict[str, Any], base: str) -> dict[str, Any]:
    """`body` with its `links` prefixed by `base`."""
    return {**body, "links": prefixed(body.get("links", {}), base)}


def flow_path(flow: Endpoints) -> str:
    return f"/{quote(flow.source, safe='')}/{quote(flow.target, safe='')}"


def flow_page_path(flow: Endpoints) -> str:
    """The flow's HTML page; the JSON stays at `flow_path`."""
    return f"{PAGE}/flows{flow_path(flow)}"


def offsets_links(flow: Endpoints, base: str) -> dict[str, str]:
    path = f"{base}{flow_path(flow)}"
    return {"herder [GET]": path, "offsets [GET]": f"{path}/offsets",
            "offsets modification [PATCH]": f"{path}/offsets", "offsets reset [DELETE]": f"{path}/offsets"}


class RunbookLink(BaseModel):
    dag_id: str
    label: str
    href: str
    run_id: str | None = None  # the flow's latest run of this runbook, whose page the link opens


def ui_base(base: str) -> str:
    """Airflow's UI root, from where this app is mounted (`…/mirrorbook` -> `…`)."""
    return base[: -len(PREFIX)] if base.endswith(PREFIX) else ""


def runbook_links(base: str, latest_runs: dict[str, str]) -> list[RunbookLink]:
    """Airflow 3.3's UI cannot pre-fill a trigger form from a URL (apache/airflow#54800 is open; #59231
    did it and was reverted by #59769). What it can do: on a DAG run's page, Trigger offers "Trigger again
    with this config", which opens the form filled with that run's parameters. So a runbook the flow has
    run before links to its latest run of it (found in the audit trail); one it never ran, to the DAG."""
    ui = ui_base(base)
    out = []
    for dag_id, label in RUNBOOKS.items():
        run_id = latest_runs.get(dag_id)
        href = f"{ui}/dags/{dag_id}" + (f"/runs/{quote(run_id, safe='')}" if run_id else "")
        out.append(RunbookLink(dag_id=dag_id, label=label, href=href, run_id=run_id))
    return out
