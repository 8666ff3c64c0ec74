"""librdkafka client configuration: from a bootstrap string or a config mapping, secrets kept out of logs."""

from __future__ import annotations

import logging
from typing import Any, Mapping

SECRET_KEYS = ("password", "secret", "sasl.jaas.config", "ssl.key.pem", "token")
_rdkafka_log = logging.getLogger("mirrorbook.kafka.rdkafka")


def client_config(config: str | Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """A config dict for confluent-kafka; librdkafka's own log lines go to Python logging (quiet by default)."""
    base: dict[str, Any] = {"bootstrap.servers": config} if isinstance(config, str) else dict(config)
    base.setdefault("logger", _rdkafka_log)
    base.update(extra)
    return base


def redact(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config with secret values replaced — the only form that may be logged, audited or reported."""
    return {k: ("***" if any(s in k.lower() for s in SECRET_KEYS) else v)
            for k, v in config.items() if k != "logger"}
