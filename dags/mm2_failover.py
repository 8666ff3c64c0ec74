"""mm2_failover: defined in the installed mirrorbook package; its documentation is the DAG's Docs tab."""
# Written by `mirrorbook dags install`: the DAG is mirrorbook.airflow.dag_definitions.mm2_failover.
from mirrorbook.airflow.dag_definitions import mm2_failover

dag = mm2_failover.build()
