"""mm2_offsets: defined in the installed mirrorbook package; its documentation is the DAG's Docs tab."""
# Written by `mirrorbook dags install`: the DAG is mirrorbook.airflow.dag_definitions.mm2_offsets.
from mirrorbook.airflow.dag_definitions import mm2_offsets

dag = mm2_offsets.build()
