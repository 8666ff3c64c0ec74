"""Provider info for the `apache_airflow_provider` entry point (must import without Airflow side effects)."""

from __future__ import annotations

from typing import Any

import mirrorbook


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "mirrorbook",
        "name": "mirrorbook",
        "description": "Disaster-recovery runbooks for Kafka MirrorMaker 2 (Kafka Connect REST, KIP-875).",
        "versions": [mirrorbook.__version__],
    }
