"""What a secured cluster refuses, said so an operator can act: the cluster, the principal, what is wrong, the fix.

librdkafka hides most of it: a client with a wrong SCRAM password, an untrusted CA or a plaintext client on a
TLS listener does not fail — it retries in the background, and an admin call answers an empty group list or
times out. `probe` looks when a client is made: the errors librdkafka reports (its error callback) during one
metadata request tell an authentication or TLS failure from a cluster that is simply down (which it leaves to
the caller, as before). Authorization failures come back on the call that lacked the right: `denied` names it.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from confluent_kafka import KafkaError, KafkaException

from mirrorbook.errors import Refused

PROBE_S = 10.0  # at most this long to tell (a healthy cluster answers in milliseconds)

# The right each admin operation needs (Kafka's authorization table), as the refusal names it.
RIGHTS = {
    "alter consumer group offsets": "READ on the group (and READ on its topics)",
    "list consumer group offsets": "DESCRIBE on the group (and DESCRIBE on its topics)",
    "describe consumer groups": "DESCRIBE on the group",
    "delete consumer groups": "DELETE on the group",
    "create topics": "CREATE on the topic (or on the cluster)",
    "list offsets": "DESCRIBE on the topic",
    "describe configs": "DESCRIBE_CONFIGS on the topic",
}
_AUTHZ = {"GROUP_AUTHORIZATION_FAILED": "group", "TOPIC_AUTHORIZATION_FAILED": "topic",
          "CLUSTER_AUTHORIZATION_FAILED": "cluster", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": "transactional id"}


class AccessDenied(Refused):
    """The cluster refused this client: authentication, TLS trust, protocol, or an ACL. Nothing was changed by
    the refused call, and retrying cannot help."""


@dataclass(frozen=True)
class Who:
    """A client as refusals name it (never its secrets)."""

    cluster: str  # "Kafka cluster B (localhost:9092)"
    principal: str  # "User:mirrorbook", or what the protocol makes of a client without SASL
    protocol: str
    mechanism: str | None
    ca: str | None

    @classmethod
    def of(cls, config: Mapping[str, Any], name: str | None) -> Who:
        bootstrap = str(config.get("bootstrap.servers"))
        protocol = str(config.get("security.protocol", "PLAINTEXT")).upper()
        user = config.get("sasl.username")
        principal = f"User:{user}" if user else ("User:ANONYMOUS" if protocol in ("PLAINTEXT", "SSL") else "?")
        return cls(cluster=f"Kafka cluster {name} ({bootstrap})" if name else f"Kafka cluster {bootstrap}",
                   principal=principal, protocol=protocol,
                   mechanism=config.get("sasl.mechanism") or config.get("sasl.mechanisms"),
                   ca=config.get("ssl.ca.location"))


class Reports:
    """What librdkafka tells about one client: its errors (error callback) and its log lines (its logger, which
    passes them on to mirrorbook's rdkafka logger as before)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.errors: deque = deque(maxlen=50)
        self.lines: deque = deque(maxlen=200)
        base = config.get("logger")
        # Not registered with logging: it lives and dies with its client. It hears every line librdkafka gives
        # and passes on to the configured logger exactly what that logger would have logged.
        self.logger = logging.Logger("mirrorbook.kafka.rdkafka", logging.DEBUG)
        self.logger.propagate = False
        self.logger.addHandler(_Tap(self.lines, base if isinstance(base, logging.Logger) else None))

    def client_config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        return {**config, "error_cb": self.errors.append, "logger": self.logger}

    def clear(self) -> None:
        self.errors.clear()
        self.lines.clear()


class _Tap(logging.Handler):
    def __init__(self, into: deque, then: logging.Logger | None) -> None:
        super().__init__(logging.DEBUG)
        self.into, self.then = into, then

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record.getMessage())
        if self.then is not None and self.then.isEnabledFor(record.levelno):
            self.then.handle(record)


def classify(errors: list[KafkaError], who: Who, lines: Sequence[str] = ()) -> AccessDenied | None:
    """The refusal among what librdkafka reported, or None (down, or nothing wrong)."""
    for err in errors:
        text = err.str()
        if err.name() == "_AUTHENTICATION" or "SASL authentication error" in text:
            return AccessDenied(
                f"{who.cluster} refused the credentials of principal {who.principal} ({who.mechanism or 'SASL'}): "
                "authentication failed — a wrong username or password, or a user the cluster does not know",
                "correct sasl.username/sasl.password in this cluster's connection (for SCRAM, the user must exist "
                "on the cluster: kafka-configs --alter --add-config 'SCRAM-SHA-512=[password=…]' --entity-type users)")
        if "certificate verify failed" in text or (err.name() == "_SSL" and "certificate" in text):
            trust = f"the CA in ssl.ca.location ({who.ca})" if who.ca else "the system's CA certificates"
            return AccessDenied(
                f"mirrorbook refused the TLS certificate of {who.cluster}: the broker's certificate is not trusted "
                f"by {trust}, so the TLS handshake failed (principal {who.principal} never got to authenticate)",
                "set ssl.ca.location in this cluster's connection to the CA file that signed the brokers' "
                "certificates")
    # A TLS listener closes a plaintext client's connection at its first request (librdkafka: "closed by peer …
    # in state APIVERSION_QUERY", or its own hint about security.protocol); a broker merely starting or stopping
    # holds or refuses the connection instead.
    dropped = [ln for ln in lines if ("closed by peer" in ln and "APIVERSION_QUERY" in ln)
               or "incorrect security.protocol" in ln]
    if len(dropped) >= 2 and who.protocol in ("PLAINTEXT", "SASL_PLAINTEXT"):
        return AccessDenied(
            f"{who.cluster} accepts connections but drops this {who.protocol} client: the listener expects TLS "
            "(a plaintext client on a TLS port)",
            "set security.protocol=SASL_SSL (or SSL) in this cluster's connection, with ssl.ca.location and, for "
            "SASL, sasl.mechanism/sasl.username/sasl.password")
    return None


def probe(client: Any, reports: Reports, who: Who, deadline_s: float = PROBE_S) -> None:
    """Raise AccessDenied if the cluster refuses this client; return when it answers, or looks merely down."""
    end = time.monotonic() + deadline_s
    while True:
        try:
            client.list_topics(timeout=0.5)
            return
        except KafkaException:
            client.poll(0)
        seen = list(reports.errors)
        refusal = classify(seen, who, list(reports.lines))
        if refusal is not None:
            raise refusal
        down = any(e.name() == "_ALL_BROKERS_DOWN" for e in seen)
        if (down and not any("APIVERSION_QUERY" in ln for ln in reports.lines)) or time.monotonic() > end:
            return  # down (or slow): the calls that follow report it as they always did


def denied(err: KafkaError, who: Who, what: str, on: str = "") -> AccessDenied | None:
    """An authorization failure of `what` (an admin operation), naming the principal and the right it lacks."""
    kind = _AUTHZ.get(err.name())
    if kind is None:
        return None
    right = RIGHTS.get(what, f"the right to {what} on the {kind}")
    return AccessDenied(f"{who.cluster}: principal {who.principal} may not {what}{' of ' + on if on else ''} — "
                        f"it lacks {right} ({err.str()})",
                        f"grant it: kafka-acls --add --allow-principal {who.principal} --operation "
                        f"{right.split()[0]} --{kind.replace(' ', '-') if kind != 'cluster' else 'cluster'}"
                        + ("" if kind == "cluster" else " <name>") + ", or use a connection whose principal has it")
