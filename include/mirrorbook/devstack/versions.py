"""Pinned versions of the JVM artifacts mirrorbook fetches from Maven Central — the one place they live.

KAFKA_VERSION is the newest 4.x release whose broker *and* Connect/MirrorMaker artifacts are all on
Maven Central. (4.4.0 has kafka_2.13 and kafka-clients there, but not connect-runtime or
connect-mirror, so it cannot run MM2; re-check with `mirrorbook devstack versions --check`.)
"""

KAFKA_VERSION = "4.3.1"
SCALA_BINARY_VERSION = "2.13"
# Kafka 4.x logs through log4j2; this matches the log4j-core that kafka_2.13 itself depends on.
LOG4J_VERSION = "2.25.4"
# PySpark from PyPI. Spark's Kafka source for the record-parity job is a Maven artifact (Scala 2.13);
# 4.3.0 of spark-sql-kafka-0-10 is not on Maven Central, so the newest published 4.x is used with it.
SPARK_VERSION = "4.3.0"
SPARK_KAFKA_VERSION = "4.2.0"

KAFKA_GROUP = "org.apache.kafka"
KAFKA_ARTIFACTS = (
    f"kafka_{SCALA_BINARY_VERSION}",
    "connect-runtime",
    "connect-mirror",
    "connect-mirror-client",
    "connect-basic-auth-extension",
)


def kafka_coordinates(version: str = KAFKA_VERSION) -> list[str]:
    """Maven coordinates (group:artifact:version) of everything the brokers and workers need."""
    coords = [f"{KAFKA_GROUP}:{a}:{version}" for a in KAFKA_ARTIFACTS]
    coords.append(f"org.apache.logging.log4j:log4j-slf4j-impl:{LOG4J_VERSION}")
    return coords


def spark_kafka_coordinates(version: str = SPARK_KAFKA_VERSION) -> list[str]:
    return [f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY_VERSION}:{version}"]
