"""KIP-1144's control endpoints: `PUT …/pause`, `PUT …/resume`, `GET|PATCH|DELETE …/offsets`.

Offsets are the flow's MirrorSourceConnector's (the KIP redirects them there). PATCH validates the
body with the same rules as the mm2_offsets runbook before anything is sent; PATCH and DELETE need a
STOPPED source connector, exactly as Connect does (same 400, same message).

What a mutating route does not take is refused before anything is read or changed, never ignored: every
query parameter (none of them takes one), any body on PUT and DELETE, and any key of PATCH's body that
KIP-875 does not have — named, with the closest known key, in the runbooks' own words (`bounds.unknown_keys`).
A `?dry_run=true` or a `{"dryrun": true}` body therefore changes nothing instead of pausing for real.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from mirrorbook.airflow.api import actions
from mirrorbook.airflow.api.auth import FlowOperator, OffsetsOperator, Reader
from mirrorbook.airflow.api.context import AuditDep, BasePath, ClientsDep, FlowDep
from mirrorbook.airflow.api.links import flow_path, offsets_links, rebased
from mirrorbook.airflow.api.errors import UnknownInput
from mirrorbook.airflow.api.models import Caller, ConnectorChangeOut, FlowActionOut, OffsetsChangeOut
from mirrorbook.audit import AuditStore
from mirrorbook.bounds import PARAM_LIMITS, InputTooLarge, cut, loads, unknown_keys
from mirrorbook.clients import Clients
from mirrorbook.errors import Refused
from mirrorbook.mm2.offsets import EXPECTED, InvalidOffsets, validate_offsets
from mirrorbook.replication import backend_for
from mirrorbook.topology import CONNECTOR_CLASSES, FlowSpec

router = APIRouter()
BODY = "request body"


def _route(request: Request) -> str:
    route = request.scope.get("route")
    return f"{request.method} {getattr(route, 'path', None) or cut(request.url.path)}"


def no_query(request: Request) -> None:
    """No mutating route takes a query parameter: each one sent is refused, by name."""
    keys = list(dict.fromkeys(k for k, _ in request.query_params.multi_items()))
    said = unknown_keys(keys, (), "query parameter")
    if said:
        raise UnknownInput(f"{said}: {_route(request)} takes no query parameters")


async def no_input(request: Request) -> None:
    """PUT …/pause|resume and DELETE …/offsets take no query parameter and no body: any is refused (a body's
    keys named when it is a JSON object)."""
    no_query(request)
    raw = await bounded_body(request, PARAM_LIMITS.max_bytes)
    if not raw.strip():
        return
    try:
        body = loads(BODY, raw.decode("utf-8"), PARAM_LIMITS)
    except (Refused, ValueError):  # not JSON, not UTF-8, too big or deep: refused all the same, unread
        body = None
    said = unknown_keys(body, (), "key") if isinstance(body, dict) and body else None
    raise UnknownInput(f"{_route(request)} takes no request body"
                       + (f": {said}" if said else f" (got {len(raw)} bytes)"))


NoQuery = Annotated[None, Depends(no_query)]
NoInput = Annotated[None, Depends(no_input)]
# Connect's own success messages (KIP-875), returned when the change was made.
ALTERED = "The offsets for this connector have been altered successfully"
RESET = "The offsets for this connector have been reset successfully"


@router.put("/{source}/{target}/pause", response_model=FlowActionOut, summary="Pause the flow's connectors")
async def pause(caller: FlowOperator, _: NoInput, flow: FlowDep, clients: ClientsDep, audit: AuditDep,
                base: BasePath) -> FlowActionOut:
    return await _set_state("pause", caller, flow, clients, audit, base)


@router.put("/{source}/{target}/resume", response_model=FlowActionOut, summary="Resume the flow's connectors")
async def resume(caller: FlowOperator, _: NoInput, flow: FlowDep, clients: ClientsDep, audit: AuditDep,
                 base: BasePath) -> FlowActionOut:
    return await _set_state("resume", caller, flow, clients, audit, base)


async def _set_state(action: actions.StateAction, caller: Caller, flow: FlowSpec, clients: Clients,
                     audit: AuditStore, base: str) -> FlowActionOut:
    rb, outcomes = await asyncio.to_thread(actions.set_state, clients, flow, action, caller, audit)
    after = await backend_for(clients, flow).astatus(with_lag=False)
    by_role = {o.details["role"]: o for o in outcomes}  # the engine's order is the safe order, not ours to show
    changes = {cls: ConnectorChangeOut(connector=o.details["connector"], result=o.result, before=o.before,
                                       after=o.after)
               for role, cls in CONNECTOR_CLASSES.items() if (o := by_role.get(role))}
    links = {"herder [GET]": f"{base}{flow_path(flow)}", **rebased(after.kip1144_detail(), base)["links"]}
    return FlowActionOut(flow=flow.name, action=action, state=after.state.value,
                         mutations=sum(o.mutations for o in outcomes), auditRunId=rb.info.run_id,
                         connectors=changes, links=links)


@router.get("/{source}/{target}/offsets", summary="The flow's MirrorSourceConnector offsets (KIP-875 body)")
async def get_offsets(_: Reader, flow: FlowDep, clients: ClientsDep, base: BasePath) -> dict[str, Any]:
    offsets = await asyncio.to_thread(backend_for(clients, flow).own_offsets, "source")
    return {**offsets.to_body(), "links": offsets_links(flow, base)}


# The body is read raw (not as a FastAPI model) so that any malformed body gets validate_offsets' precise
# 400 message rather than a generic 422; its schema is still published.
KIP875_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "required": ["offsets"], "properties": {"offsets": {"type": "array", "items": {
        "type": "object", "required": ["partition", "offset"],
        "properties": {"partition": {"type": "object"}, "offset": {"type": ["object", "null"]}}}}}}}}}}


@router.patch("/{source}/{target}/offsets", response_model=OffsetsChangeOut, openapi_extra=KIP875_BODY,
              summary="Alter the flow's source offsets (connector must be STOPPED); snapshot first, audited")
async def patch_offsets(request: Request, caller: OffsetsOperator, _: NoQuery, flow: FlowDep, clients: ClientsDep,
                        audit: AuditDep, base: BasePath) -> OffsetsChangeOut:
    requested = validate_offsets("source", await _json_body(request), flow)
    rb, outcome = await asyncio.to_thread(actions.change_source_offsets, clients, flow, "alter", caller, audit,
                                          requested)
    return _offsets_out(flow, rb.info.run_id, outcome, ALTERED, base)


@router.delete("/{source}/{target}/offsets", response_model=OffsetsChangeOut,
               summary="Reset the flow's source offsets (connector must be STOPPED); snapshot first, audited")
async def delete_offsets(caller: OffsetsOperator, _: NoInput, flow: FlowDep, clients: ClientsDep, audit: AuditDep,
                         base: BasePath) -> OffsetsChangeOut:
    rb, outcome = await asyncio.to_thread(actions.change_source_offsets, clients, flow, "reset", caller, audit)
    return _offsets_out(flow, rb.info.run_id, outcome, RESET, base)


async def _json_body(request: Request) -> Any:
    """The body, parsed within bounds (`bounds.loads`: too big or too deep is refused before the parser
    runs — it recurses once per level — and each string, key and integer after)."""
    raw = await bounded_body(request, PARAM_LIMITS.max_bytes)
    if not raw.strip():
        raise InvalidOffsets("The request body is empty; expected KIP-875 offsets", EXPECTED)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidOffsets(f"The request body is not UTF-8 (byte {exc.start})", EXPECTED) from None
    try:
        return loads(BODY, text, PARAM_LIMITS)
    except json.JSONDecodeError:
        return text  # validate_offsets names the JSON error precisely


async def bounded_body(request: Request, limit: int) -> bytes:
    """At most `limit` bytes are ever held: a bigger body is refused while it is still arriving."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and (len(declared.lstrip("0")) > len(str(limit)) or int(declared) > limit):
        raise InputTooLarge(f"`{BODY}` is {cut(declared, 20)} bytes; the limit is {limit}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise InputTooLarge(f"`{BODY}` is more than {limit} bytes, the limit")
        chunks.append(chunk)
    return b"".join(chunks)


def _offsets_out(flow: FlowSpec, run_id: str, outcome: Any, done: str, base: str) -> OffsetsChangeOut:
    name = flow.connector("source")
    changed = outcome.mutations > 0
    message = done if changed else f"The offsets of {name} already were as requested; nothing was changed"
    return OffsetsChangeOut(message=message, connector=name, changed=changed, snapshotId=outcome.snapshot_id,
                            auditRunId=run_id, links=offsets_links(flow, base))
