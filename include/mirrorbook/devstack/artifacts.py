"""The Kafka runtime's jars (brokers, Connect, MM2), fetched once into the cache by `mirrorbook.maven`.

The fetching itself, and the Spark Kafka source's set the proofs need too, live in `mirrorbook.maven`,
below both the devstack and the proofs.
"""

from __future__ import annotations

from pathlib import Path

from mirrorbook.maven import resolve, versions


def kafka_libs(root: Path | None = None) -> Path:
    return resolve(versions.kafka_coordinates(), f"kafka-{versions.KAFKA_VERSION}", root=root)
