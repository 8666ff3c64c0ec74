"""mirrorbook: disaster-recovery runbooks for Kafka MirrorMaker 2, orchestrated by Airflow."""

__version__ = "0.1.0"
