"""mirrorbook: disaster-recovery runbooks for Kafka MirrorMaker 2, orchestrated by Airflow."""

__version__ = "0.2.0"  # the one place the version is written (pyproject, provider info, --version read it)
