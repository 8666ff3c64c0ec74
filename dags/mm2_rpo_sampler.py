"""mm2_rpo_sampler: defined in the installed mirrorbook package; its documentation is the DAG's Docs tab."""
# Written by `mirrorbook dags install`: the DAG is mirrorbook.airflow.dag_definitions.mm2_rpo_sampler.
from mirrorbook.airflow.dag_definitions import mm2_rpo_sampler

dag = mm2_rpo_sampler.build()
