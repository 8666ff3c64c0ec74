"""librdkafka client configuration: from a bootstrap string or a config mapping (what may be shown of one:
`mirrorbook.redaction`)."""

from __future__ import annotations

from typing import Any, Mapping

from mirrorbook.redaction import get_logger

_rdkafka_log = get_logger("mirrorbook.kafka.rdkafka")


def client_config(config: str | Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """A config dict for confluent-kafka; librdkafka's own log lines go to Python logging (quiet by default)."""
    base: dict[str, Any] = {"bootstrap.servers": config} if isinstance(config, str) else dict(config)
    base.setdefault("logger", _rdkafka_log)
    base.update(extra)
    return base


def java_client_options(config: Mapping[str, Any]) -> dict[str, str]:
    """The security settings of a librdkafka config, as Java client properties (Spark's Kafka source).

    Only what both clients share or what maps one to one; SASL PLAIN/SCRAM user+password become a
    `sasl.jaas.config`. The result holds secrets: it goes to a 0600 file, never to a command line.
    """
    out: dict[str, str] = {}
    for key in ("security.protocol", "ssl.endpoint.identification.algorithm"):
        if key in config:
            out[key] = str(config[key])
    mech = config.get("sasl.mechanisms") or config.get("sasl.mechanism")
    if mech:
        out["sasl.mechanism"] = str(mech)
        user, password = config.get("sasl.username"), config.get("sasl.password")
        if user is not None and "sasl.jaas.config" not in config:
            module = ("org.apache.kafka.common.security.scram.ScramLoginModule" if str(mech).startswith("SCRAM")
                      else "org.apache.kafka.common.security.plain.PlainLoginModule")
            out["sasl.jaas.config"] = f'{module} required username="{user}" password="{password}";'
    if "sasl.jaas.config" in config:
        out["sasl.jaas.config"] = str(config["sasl.jaas.config"])
    if "ssl.ca.location" in config:
        out["ssl.truststore.type"] = "PEM"
        out["ssl.truststore.location"] = str(config["ssl.ca.location"])
    return out
