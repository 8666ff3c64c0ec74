"""Airflow glue: provider info, hooks, operators, sensors, triggers. The only package that imports Airflow."""
