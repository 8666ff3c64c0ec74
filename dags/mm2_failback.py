"""mm2_failback: defined in the installed mirrorbook package; its documentation is the DAG's Docs tab."""
# Written by `mirrorbook dags install`: the DAG is mirrorbook.airflow.dag_definitions.mm2_failback.
from mirrorbook.airflow.dag_definitions import mm2_failback

dag = mm2_failback.build()
