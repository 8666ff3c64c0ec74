"""Airflow glue: provider info, hooks, operators, sensors, triggers, the plugin's web app (`api`).
The only package that imports Airflow."""
