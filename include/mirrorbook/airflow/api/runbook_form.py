"""Each runbook's form for one flow, at `/page/flows/{source}/{target}/runbooks/{dag_id}`: the flow filled in
and fixed by the address, every other parameter generated from the runbook's model — the same Params the
DAG's own trigger form shows (mirrorbook.airflow.forms), in the same order, at their defaults.

Submitting it validates the parameters as the runbook's first task will (`params.parse`: sizes, unknown keys,
types, the topology), so a mistake is named on the form before anything exists; then it triggers the DAG
through Airflow's public REST API as `mirrorbook trigger` does (explicit run id, so a second click cannot
start a second run), with the caller's own token: Airflow's auth manager decides whether this user may
trigger it and the run is theirs. The browser then goes to the run's page in Airflow.

Why not a link into Airflow's own form: Airflow 3.3's UI cannot fill it from a URL (links.runbook_links).

The form is plain HTML (no script) and its post is authenticated by Airflow's session cookie, so it must
come from this site: Airflow's cookie is SameSite=Lax, and the post must carry the browser's own word that
it came from this origin (Sec-Fetch-Site, else Origin) — checked before the body is read.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from typing import Any, Literal, Mapping
from urllib.parse import parse_qsl, urlsplit

from airflow.api_fastapi.auth.managers.base_auth_manager import COOKIE_NAME_JWT_TOKEN
from airflow.configuration import conf as airflow_conf
from fastapi import APIRouter, HTTPException, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import BaseModel, SecretStr

from mirrorbook.airflow.api.auth import Reader
from mirrorbook.airflow.api.context import BasePath, FlowDep, TopologyDep
from mirrorbook.airflow.api.control import bounded_body
from mirrorbook.airflow.api.links import PAGE_ROUTE, RUNBOOKS, flow_page_path, run_href, runbook_form_path, ui_base
from mirrorbook.airflow.api.models import Caller
from mirrorbook.airflow.api.page import render
from mirrorbook.airflow.forms import form
from mirrorbook.bounds import OFFSETS_LIMITS, cut, shown
from mirrorbook.errors import Refused
from mirrorbook.runbooks.params import FormParams, InvalidParams, parse
from mirrorbook.runbooks.registry import model_of
from mirrorbook.topology import FlowSpec
from mirrorbook.trigger import AirflowApi, DagRun, TriggerError, new_run_id

router = APIRouter()
FORM_PATH = f"{PAGE_ROUTE}/flows/{{source}}/{{target}}/runbooks/{{dag_id}}"
RUN_ID = re.compile(r"mirrorbook__\d{8}T\d{6}Z__[0-9a-f]{8}")  # what new_run_id makes
MAX_FIELDS = 100
BODY_LIMIT = 3 * OFFSETS_LIMITS.max_bytes + 65_536  # an offsets body, percent-encoded, at worst
Widget = Literal["select", "checkbox", "number", "json", "text"]


class FormField(BaseModel):
    """One parameter as the page shows it."""

    name: str
    title: str
    description: str
    widget: Widget
    value: str = ""
    checked: bool = False
    options: list[tuple[str, str]] = []  # (value, label)
    minimum: float | int | None = None
    maximum: float | int | None = None
    step: str = "any"
    max_length: int | None = None


def _types(schema: Mapping[str, Any]) -> list[str]:
    t = schema.get("type")
    return list(t) if isinstance(t, list) else [t] if t else []


def _widget(schema: Mapping[str, Any]) -> Widget:
    types = _types(schema)
    if "enum" in schema:
        return "select"
    if "boolean" in types:
        return "checkbox"
    if "object" in types:
        return "json"
    if {"integer", "number"} & set(types):
        return "number"
    return "text"


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def form_fields(model: type[FormParams], submitted: Mapping[str, str] | None = None) -> list[FormField]:
    """The fields after the flow, in the model's order, at the model's defaults — or, re-shown after a
    refusal, with what was `submitted`."""
    out = []
    for name, param in form(model, None).items():
        if name == "flow":
            continue
        schema = param.schema
        widget = _widget(schema)
        labels = schema.get("values_display") or {}
        out.append(FormField(
            name=name, title=schema.get("title") or name, description=param.description or "",
            widget=widget,
            value=_text(param.value) if submitted is None else submitted.get(name, ""),
            checked=param.value is True if submitted is None else name in submitted,
            options=[(str(v), str(labels.get(v, v))) for v in schema.get("enum", [])],
            minimum=schema.get("minimum"), maximum=schema.get("maximum"),
            step="1" if "integer" in _types(schema) else "any", max_length=schema.get("maxLength")))
    return out


def _typed(text: str, types: list[str]) -> Any:
    """A form's text as the JSON value its parameter takes; text that is not one goes on as it is, for
    the model to refuse by name."""
    stripped = text.strip()
    if "integer" in types and re.fullmatch(r"[+-]?\d{1,30}", stripped):
        return int(stripped)
    if "number" in types and len(stripped) <= 50:
        try:
            return float(stripped)
        except ValueError:
            pass
    return text


def conf_from_form(model: type[FormParams], flow: str, fields: Mapping[str, str]) -> dict[str, Any]:
    """The run's conf from a submitted form: the page's flow; a checkbox is true when sent; a blank field
    is null where the parameter may be, else left for the model to refuse (never silently the default).
    A field the runbook does not know goes on too, so that `parse` refuses it naming the closest one."""
    if "flow" in fields:
        raise InvalidParams("`flow` is fixed by the form's address, not a field",
                            "open the page of the flow to act on, and its runbook link")
    params = form(model, None)
    conf: dict[str, Any] = {"flow": flow}
    for name, param in params.items():
        if name == "flow":
            continue
        types = _types(param.schema)
        if "boolean" in types:
            conf[name] = name in fields
        elif name in fields:
            text = fields[name]
            conf[name] = None if not text.strip() and "null" in types else _typed(text, types)
    conf.update({k: v for k, v in fields.items() if k not in params})
    return conf


def cross_site(request: Request) -> str | None:
    """Why this post does not come from this site's own page, or None. A browser says where a request
    comes from (Sec-Fetch-Site; older ones Origin) and a page elsewhere cannot make it lie. A client that
    is not a browser sends neither and carries its credentials itself: it is no cross-site threat."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return None if site == "same-origin" else f"Sec-Fetch-Site: {cut(site, 40)}"
    origin = request.headers.get("origin")
    if origin is None:
        return None
    own = {f"{request.url.scheme}://{request.url.netloc}"}
    configured = urlsplit(airflow_conf.get("api", "base_url", fallback="") or "")
    if configured.scheme and configured.netloc:
        own.add(f"{configured.scheme}://{configured.netloc}")
    return None if origin in own else f"Origin: {cut(origin, 100)}"


def airflow_api_url(request: Request, base: str) -> str:
    """Where this API server answers Airflow's REST API: `[api] base_url`, Airflow's own declared address
    of it (its task workers reach the execution API there by default), else the socket this request came
    in on. Never the request's Host header: a client must not choose where its token is sent."""
    configured = (airflow_conf.get("api", "base_url", fallback="") or "").rstrip("/")
    if configured:
        return configured
    server = request.scope.get("server")
    if not server:
        raise TriggerError("cannot tell where Airflow's REST API is: set [api] base_url")
    host, port = server
    host = f"[{host}]" if ":" in host else host
    return f"{request.url.scheme}://{host}:{port}{ui_base(base)}"


def caller_token(request: Request) -> SecretStr:
    """The caller's own JWT, where Airflow's authentication read it (header first, then the UI's cookie)."""
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    token = value.strip() if scheme.lower() == "bearer" else request.cookies.get(COOKIE_NAME_JWT_TOKEN, "")
    if not token:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "Not authenticated")
    return SecretStr(token)


async def form_body(request: Request) -> dict[str, str]:
    ctype = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if ctype != "application/x-www-form-urlencoded":
        raise InvalidParams(f"a runbook form is posted as application/x-www-form-urlencoded, not {shown(ctype)}")
    raw = await bounded_body(request, BODY_LIMIT)
    try:
        pairs = parse_qsl(raw.decode("utf-8"), keep_blank_values=True, max_num_fields=MAX_FIELDS, errors="strict")
    except ValueError as exc:  # not UTF-8, a bad escape, too many fields
        raise InvalidParams(f"the form's body cannot be read: {cut(str(exc), 120)}") from None
    fields: dict[str, str] = {}
    for key, value in pairs:
        if key in fields:
            raise InvalidParams(f"the form sent {shown(key)} twice")
        fields[key] = value
    return fields


def runbook_model(dag_id: str) -> type[FormParams]:
    model = model_of(dag_id) if dag_id in RUNBOOKS else None
    if model is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"No runbook {dag_id!r}; runbooks: {', '.join(RUNBOOKS)}")
    return model


def _page(caller: Caller, flow: FlowSpec, dag_id: str, model: type[FormParams], base: str, run_id: str, *,
          submitted: Mapping[str, str] | None = None, error: str | None = None, notice: str | None = None,
          status_code: int = 200) -> HTMLResponse:
    html = render("runbook_form.html", caller.name, base, flow=flow.name, dag_id=dag_id, label=RUNBOOKS[dag_id],
                  doc=inspect.getdoc(model) or "", fields=form_fields(model, submitted), run_id=run_id,
                  action=f"{base}{runbook_form_path(flow, dag_id)}", flow_href=f"{base}{flow_page_path(flow)}",
                  dag_href=f"{ui_base(base)}/dags/{dag_id}", error=error and cut(error, 2_000), notice=notice)
    return HTMLResponse(html, status_code=status_code)


@router.get(FORM_PATH, response_class=HTMLResponse,
            summary="A runbook's form with this flow filled in and fixed (HTML)")
async def runbook_form(caller: Reader, flow: FlowDep, dag_id: str, base: BasePath) -> HTMLResponse:
    return _page(caller, flow, dag_id, runbook_model(dag_id), base, new_run_id())


def _trigger(url: str, token: SecretStr, dag_id: str, run_id: str, conf: dict[str, Any]) -> tuple[DagRun, bool]:
    with AirflowApi(url, token=token) as api:
        api.unpause(dag_id)  # as Airflow's own form does by default: a paused DAG's run would only queue
        return api.trigger(dag_id, run_id, conf)


@router.post(FORM_PATH, response_class=HTMLResponse, status_code=status.HTTP_303_SEE_OTHER,
             summary="Trigger the runbook on this flow through Airflow's REST API, as the caller; then its run")
async def trigger_runbook(request: Request, caller: Reader, flow: FlowDep, topo: TopologyDep, dag_id: str,
                          base: BasePath) -> Response:
    model = runbook_model(dag_id)
    if (why := cross_site(request)) is not None:
        raise HTTPException(status.HTTP_403_FORBIDDEN,
                            f"Forbidden: a runbook form is accepted from this site's own page only ({why})")
    fields = await form_body(request)
    run_id = fields.pop("run_id", "")
    if not RUN_ID.fullmatch(run_id):
        return _page(caller, flow, dag_id, model, base, new_run_id(), submitted=fields, status_code=400,
                     error=f"This form's run id {shown(run_id)} is not one this page made; check and submit again")
    try:
        conf = conf_from_form(model, flow.name, fields)
        parse(model, conf, topo)
    except Refused as exc:
        return _page(caller, flow, dag_id, model, base, run_id, submitted=fields, error=exc.message,
                     status_code=422)
    try:
        run, created = await asyncio.to_thread(_trigger, airflow_api_url(request, base), caller_token(request),
                                               dag_id, run_id, conf)
    except TriggerError as exc:
        return _page(caller, flow, dag_id, model, base, run_id, submitted=fields, error=exc.message,
                     status_code=502)
    if not created:  # a second post of one form (a double click, the back button): never a second run
        return _page(caller, flow, dag_id, model, base, new_run_id(), submitted=fields, status_code=409,
                     notice=f"This form was submitted before: run {run.dag_run_id} exists (state {run.state}) with "
                            "what was submitted then. Nothing new was triggered; submit again to start another run.")
    return RedirectResponse(run_href(base, dag_id, run.dag_run_id), status_code=status.HTTP_303_SEE_OTHER)
