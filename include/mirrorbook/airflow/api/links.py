"""Links. HATEOAS links: the library writes them relative to the flows API root (`/A/B`, as KIP-1144
shows); here they get the prefix the app is mounted under, so a client can follow them as given.
And the pages' links into Airflow's own UI, where the runbooks are triggered."""

from __future__ import annotations

from typing import Any, Protocol
from urllib.parse import quote

from pydantic import BaseModel

from mirrorbook.airflow.api.mount import PREFIX

PAGE_ROUTE = "/page"  # the page's route in the plugin's app (mounted under PREFIX)
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
    return f"{PAGE_ROUTE}/flows{flow_path(flow)}"


def offsets_links(flow: Endpoints, base: str) -> dict[str, str]:
    path = f"{base}{flow_path(flow)}"
    return {"herder [GET]": path, "offsets [GET]": f"{path}/offsets",
            "offsets modification [PATCH]": f"{path}/offsets", "offsets reset [DELETE]": f"{path}/offsets"}


class RunbookLink(BaseModel):
    dag_id: str
    label: str
    href: str                    # the runbook's form with this flow filled in and fixed (runbook_form.py)
    run_id: str | None = None    # the flow's latest run of this runbook (shown, never replayed)
    run_href: str | None = None


def ui_base(base: str) -> str:
    """Airflow's UI root, from where this app is mounted (`…/mirrorbook` -> `…`)."""
    return base[: -len(PREFIX)] if base.endswith(PREFIX) else ""


def runbook_form_path(flow: Endpoints, dag_id: str) -> str:
    return f"{flow_page_path(flow)}/runbooks/{quote(dag_id, safe='')}"


def run_href(base: str, dag_id: str, run_id: str) -> str:
    """A run's page in Airflow's UI."""
    return f"{ui_base(base)}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"


def runbook_links(base: str, flow: Endpoints, latest_runs: dict[str, str]) -> list[RunbookLink]:
    """Each runbook's link opens its form with this flow filled in. Airflow 3.3's UI cannot fill its own
    trigger form from a URL (no trigger route, no query parameter read: apache/airflow#54800 is open), and
    its other way — "Trigger again with this config" on a past run — replays every parameter of that run
    (a dry_run=false, an offsets body) and exists only where the flow ran the runbook before; the DAG's
    bare form defaults to the topology's first flow. So the link opens the plugin's own form, generated
    from the runbook's model with the flow fixed, which triggers through Airflow's REST API as the user.
    The flow's latest run is linked beside it, to read."""
    out = []
    for dag_id, label in RUNBOOKS.items():
        run_id = latest_runs.get(dag_id)
        out.append(RunbookLink(dag_id=dag_id, label=label, href=f"{base}{runbook_form_path(flow, dag_id)}",
                               run_id=run_id, run_href=run_href(base, dag_id, run_id) if run_id else None))
    return out
