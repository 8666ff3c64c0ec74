"""The Airflow plugin's web app: KIP-1144's flows API on top of Connect, and the operator's pages.

It lives under `mirrorbook.airflow` because it is Airflow glue: Airflow authenticates every request and
resolves the clusters through Airflow connections. `mirrorbook.airflow.api.app.create_app` builds the
app; `mirrorbook.airflow.api.mount` is what the plugin uses (it defers every heavy import to the first
request).
"""
