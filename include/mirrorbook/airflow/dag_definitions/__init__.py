"""The runbook DAGs, defined in the package: one module per DAG id, each with the DAG's documentation (its
docstring, the DAG's Docs tab) and `build()`.

A DAG folder holds only a two-line file per DAG that calls `build()` (`mirrorbook dags install DIR` writes them;
`dags/` of the repository is exactly that), so upgrading the package upgrades the DAGs. `build()` runs when the
file is parsed — never at import — so every parse reads the topology and settings as they are then.
"""
