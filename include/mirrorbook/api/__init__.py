"""The Airflow plugin's web app: KIP-1144's flows API on top of Connect, and the operator's page.

Import `mirrorbook.api.app.create_app` for the app itself; `mirrorbook.api.mount` is what the plugin
uses (it defers every heavy import to the first request).
"""
