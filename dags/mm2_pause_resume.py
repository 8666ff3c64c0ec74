"""mm2_pause_resume: defined in the installed mirrorbook package; its documentation is the DAG's Docs tab."""
# Written by `mirrorbook dags install`: the DAG is mirrorbook.airflow.dag_definitions.mm2_pause_resume.
from mirrorbook.airflow.dag_definitions import mm2_pause_resume

dag = mm2_pause_resume.build()
