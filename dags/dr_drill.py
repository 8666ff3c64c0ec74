"""dr_drill: defined in the installed mirrorbook package; its documentation is the DAG's Docs tab."""
# Written by `mirrorbook dags install`: the DAG is mirrorbook.airflow.dag_definitions.dr_drill.
from mirrorbook.airflow.dag_definitions import dr_drill

dag = dr_drill.build()
