"""mirrorbook's Airflow plugin: the KIP-1144 flows API and the flows/drills/audit pages.

Registered by the package's `airflow.plugins` entry point (pyproject.toml), so an installed mirrorbook brings it
without a plugins folder. Served by Airflow's API server under /mirrorbook (`GET /mirrorbook/`,
`/mirrorbook/{source}/{target}`…, its schema at /mirrorbook/openapi.json, /docs, /redoc; the pages at
/mirrorbook/page, linked from the UI's Browse menu, and /mirrorbook/page/flows/{source}/{target}; Prometheus metrics
at /mirrorbook/metrics), every route behind Airflow's authentication (the metrics also behind the scrape token
MIRRORBOOK_METRICS_TOKEN).
"""

from airflow.plugins_manager import AirflowPlugin

from mirrorbook.airflow.api.mount import external_view, fastapi_app


class MirrorbookPlugin(AirflowPlugin):
    name = "mirrorbook"
    fastapi_apps = [fastapi_app()]
    external_views = [external_view()]
