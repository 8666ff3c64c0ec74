"""The API's OpenAPI schema and its two viewers (Swagger UI, ReDoc), behind Airflow's auth like every
other route: FastAPI's own `/openapi.json`, `/docs` and `/redoc` are public, and the schema names every
flow operation a caller could try. Reading them needs the same right as reading flows.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse

from mirrorbook.airflow.api.auth import Reader
from mirrorbook.airflow.api.context import BasePath

router = APIRouter(include_in_schema=False)
SCHEMA = "/openapi.json"


@router.get(SCHEMA)
async def openapi(_: Reader, request: Request, base: BasePath) -> dict[str, Any]:
    # `servers` is where the app is mounted, so "try it out" and generated clients call the right paths.
    return {**request.app.openapi(), "servers": [{"url": base or "/"}]}


@router.get("/docs")
async def swagger(_: Reader, request: Request, base: BasePath) -> HTMLResponse:
    return get_swagger_ui_html(openapi_url=f"{base}{SCHEMA}", title=f"{request.app.title} - Swagger UI")


@router.get("/redoc")
async def redoc(_: Reader, request: Request, base: BasePath) -> HTMLResponse:
    return get_redoc_html(openapi_url=f"{base}{SCHEMA}", title=f"{request.app.title} - ReDoc")
