"""How the plugin mounts the app, kept free of heavy imports.

Every Airflow component (scheduler, dag-processor, triggerer, task processes) imports every plugin,
but only the API server serves `fastapi_apps`. So the plugin mounts a thin ASGI app that builds the
real one — FastAPI, Airflow's security module, the Connect client — on its first request.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

PREFIX = "/mirrorbook"
PAGE_HREF = f"{PREFIX}/page"  # where the page is served: the navigation link's href

Scope = dict[str, Any]


class LazyApp:
    """An ASGI app that builds `factory()` on first use (once, even under concurrent first requests)."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._app: Any = None
        self._lock = threading.Lock()

    def _get(self) -> Any:
        if self._app is None:
            with self._lock:
                if self._app is None:
                    self._app = self._factory()
        return self._app

    async def __call__(self, scope: Scope, receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        await self._get()(scope, receive, send)


def _build() -> Any:
    from mirrorbook.airflow.api.app import create_app

    return create_app()


def fastapi_app() -> dict[str, Any]:
    """The plugin's `fastapi_apps` entry."""
    return {"name": "mirrorbook flows API (KIP-1144)", "app": LazyApp(_build), "url_prefix": PREFIX}


def external_view() -> dict[str, Any]:
    """The plugin's `external_views` entry: the page, in Airflow's navigation (Browse menu)."""
    return {"name": "MM2 flows", "href": PAGE_HREF, "url_route": "mirrorbook", "destination": "nav",
            "category": "browse"}
