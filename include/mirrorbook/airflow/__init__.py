"""Airflow glue: provider info, hooks, operators, sensors, triggers, the plugin's web app (`api`).
The only package that imports Airflow.

Importing it makes mirrorbook's settings read Airflow's `[mirrorbook]` configuration section first
(`mirrorbook.settings`), and lets the audit store be an Airflow connection (`audit_conn_id`)."""

from __future__ import annotations

import sys

from mirrorbook import settings


def _from_airflow_config(key: str) -> str | None:
    """Airflow's `[mirrorbook] key`, in a process where Airflow has loaded its configuration (every Airflow
    component has); elsewhere — the CLI resolving a connection through Airflow — loading it only to read a setting
    would write a default airflow.cfg and print Airflow's warnings: the environment answers there."""
    configuration = sys.modules.get("airflow.configuration")
    if configuration is None:
        return None
    return configuration.conf.get(settings.SECTION, key, fallback=None)


def _connection_uri(conn_id: str) -> str:
    from airflow.sdk import BaseHook

    return BaseHook.get_connection(conn_id).get_uri()


settings.register_source(_from_airflow_config, _connection_uri)
