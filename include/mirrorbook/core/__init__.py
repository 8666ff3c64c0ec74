"""The core every runbook shares, below the replication backends and knowing none of them: the step engine
(`engine.py`: every mutation through `Step.mutate`, dry-run plans, write-ahead intents, audit events), what a
run changed (`changes.py`) and what a mutating call leaves in place (`expect.py`)."""
