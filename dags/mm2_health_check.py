"""mm2_health_check: defined in the installed mirrorbook package; its documentation is the DAG's Docs tab."""
# Written by `mirrorbook dags install`: the DAG is mirrorbook.airflow.dag_definitions.mm2_health_check.
from mirrorbook.airflow.dag_definitions import mm2_health_check

dag = mm2_health_check.build()
