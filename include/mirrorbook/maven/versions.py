"""Pinned versions of the JVM artifacts mirrorbook fetches from Maven Central — the one place they live.

KAFKA_VERSION is the newest 4.x release whose broker *and* Connect/MirrorMaker artifacts are all on
Maven Central. (4.4.0 has kafka_2.13 and kafka-clients there, but not connect-runtime or
connect-mirror, so it cannot run MM2; re-check with `mirrorbook devstack versions --check`.)
"""

KAFKA_VERSION = "4.3.1"
SCALA_BINARY_VERSION = "2.13"
# Kafka 4.x logs through log4j2; this matches the log4j-core that kafka_2.13 itself depends on.
LOG4J_VERSION = "2.25.4"
# PySpark from PyPI. Spark's Kafka source for the record-parity job is a Maven artifact (Scala 2.13).
# The Maven Central this project reaches has spark-sql-kafka-0-10_2.13 up to 4.2.0 (no 4.3.0), and its
# compile dependency spark-token-provider-kafka-0-10_2.13 only as 4.0.0 in 4.x (no 4.2.0), so a plain
# transitive resolve of 4.2.0 fails. We take spark-sql-kafka 4.2.0 *without* its token provider and add
# token-provider 4.0.0 plus the runtime deps explicitly. The token provider is only used for Kafka
# delegation tokens (Kerberos/SASL on YARN); its 4.0.0 API is the one 4.2.0 calls. Checked for real:
# this set reads the devstack's topics from pyspark 4.3.0 in local mode (tests/spark/test_record_parity.py).
SPARK_VERSION = "4.3.0"
SPARK_KAFKA_VERSION = "4.2.0"
SPARK_TOKEN_PROVIDER_VERSION = "4.0.0"
# The kafka-clients and commons-pool2 that spark-sql-kafka 4.2.0 itself declares (its POM).
SPARK_KAFKA_CLIENTS_VERSION = "3.9.2"
SPARK_COMMONS_POOL2_VERSION = "2.13.1"

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


_SPARK_KAFKA = f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY_VERSION}"
_SPARK_TOKEN_PROVIDER = f"org.apache.spark:spark-token-provider-kafka-0-10_{SCALA_BINARY_VERSION}"
# Jars the Spark runtime (pyspark's jars/) already ships in its own versions: never ship a second copy.
_SPARK_PROVIDED = (
    f"org.apache.spark:spark-tags_{SCALA_BINARY_VERSION}",
    "org.apache.hadoop:hadoop-client-runtime",
    f"org.scala-lang.modules:scala-parallel-collections_{SCALA_BINARY_VERSION}",
    "com.google.code.findbugs:jsr305",
    "com.github.luben:zstd-jni",
    "org.lz4:lz4-java",
    "at.yawk.lz4:lz4-java",  # the maintained fork kafka-clients 3.9.2 and Spark 4.3 use
    "org.xerial.snappy:snappy-java",
    "org.slf4j:slf4j-api",
)


def spark_kafka_coordinates(version: str = SPARK_KAFKA_VERSION) -> list[str]:
    """Spark's Kafka source and the runtime jars it needs beside pyspark's own (passed with --jars)."""
    return [
        f"{_SPARK_KAFKA}:{version}",
        f"{_SPARK_TOKEN_PROVIDER}:{SPARK_TOKEN_PROVIDER_VERSION}",
        f"org.apache.kafka:kafka-clients:{SPARK_KAFKA_CLIENTS_VERSION}",
        f"org.apache.commons:commons-pool2:{SPARK_COMMONS_POOL2_VERSION}",
    ]


def spark_kafka_exclusions() -> dict[str, list[str]]:
    """Per-dependency exclusions (group:artifact → excluded group:artifact) for `spark_kafka_coordinates`.

    The token provider 4.2.0 that spark-sql-kafka 4.2.0 names is not published (see above); the
    other exclusions keep Spark's own jars from appearing twice on the classpath.
    """
    return {
        _SPARK_KAFKA: [_SPARK_TOKEN_PROVIDER, "org.apache.kafka:kafka-clients", *_SPARK_PROVIDED],
        _SPARK_TOKEN_PROVIDER: ["org.apache.kafka:kafka-clients", *_SPARK_PROVIDED],
        "org.apache.kafka:kafka-clients": list(_SPARK_PROVIDED),
    }
