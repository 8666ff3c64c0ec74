"""mirrorbook.redaction: the one set of rules for what may be shown or kept — secret-looking keys,
credentials inside free text — and the flows API's views built on it."""

from __future__ import annotations

import base64
import json
import logging

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mirrorbook.airflow.api.redaction import HIDDEN, public_bootstrap, public_config
from mirrorbook.redaction import MASK, is_secret_key, redact, redact_text, utf8

SECRET = "hunter2"
JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="{SECRET}";'


def _dirty() -> dict:
    return {
        "connect": f"http://admin:{SECRET}@connect:8083/connectors",
        "sasl.jaas.config": JAAS,
        "consumer.override.sasl.jaas.config": JAAS,
        "ssl.truststore.password": SECRET,
        "nested": [{"Authorization": f"Basic {SECRET}aGVsbG8="}, {"api-key": SECRET}, {"X-Auth-Token": SECRET},
                   {"basic.auth.user.info": f"u:{SECRET}"}, {"ssl.keystore.key": SECRET}],
        "log": f"GET with header Authorization: Bearer {SECRET}abcdef failed; jaas {JAAS}",
        "harmless": "http://connect:8083/connectors?expand=status",
    }


def test_redact_masks_keys_and_embedded_credentials() -> None:
    out = redact(_dirty())
    assert SECRET not in repr(out)
    assert out["connect"] == "http://admin:***@connect:8083/connectors"
    assert out["sasl.jaas.config"] == "***" and out["ssl.truststore.password"] == "***"
    assert out["harmless"] == "http://connect:8083/connectors?expand=status"
    assert redact_text("no secrets: offset=5 partition=2") == "no secrets: offset=5 partition=2"
    assert redact({"password": None}) == {"password": None}


def test_keys_are_scrubbed_as_text_too() -> None:
    assert redact({f"http://u:{SECRET}@host": 1}) == {"http://u:***@host": 1}


@pytest.mark.parametrize("text", [
    # JAAS settings written as text: the whole value goes, usernames included, `;` inside quotes or not
    f"sasl.jaas.config={JAAS} next=1",
    f'listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config = {JAAS.replace(SECRET, "a;" + SECRET)}',
    json.dumps({"sasl.jaas.config": JAAS, "b": 2}),
    repr({"consumer.override.sasl.jaas.config": JAAS}),
    # a JAAS config inside a JSON string: its quotes are escaped
    json.dumps({"config": JAAS}),
    json.dumps({"error": json.dumps({"sasl.password": SECRET})}),
    # any secret-looking name ends the key, in any spelling
    f"KAFKA_SASL_PASSWORD={SECRET} other=1",
    f'OAuthBearerLoginModule required clientId="me" clientSecret="{SECRET}";',
    f"aws_secret_access_key={SECRET}",
    f"awsSecretAccessKey={SECRET}",
    f"x-api-key: {SECRET}",
    f"basic.auth.user.info=u:{SECRET}",
    f"DSN: host=db user=app pwd={SECRET}",
    # headers and URLs
    "Authorization: Basic " + base64.b64encode(f"admin:{SECRET}".encode()).decode(),
    f"Authorization: Bearer {SECRET}.abc.def",
    f"postgresql://app:{SECRET}@db:5432/audit",
    f"jdbc_http://app:{SECRET}@db",
    # PEM private keys, whole or cut before their END line
    f"-----BEGIN PRIVATE KEY-----\nMIIE{SECRET}\n-----END PRIVATE KEY----- after",
    f"-----BEGIN RSA PRIVATE KEY-----\nMIIE{SECRET}abc",
    json.dumps({"ssl": f"-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIE{SECRET}\n-----END ENCRYPTED PRIVATE KEY-----"}),
    # text cut inside the secret (a quote left open)
    f'password="{SECRET}',
    json.dumps({"config": JAAS})[:json.dumps({"config": JAAS}).index(SECRET) + 3],
])
def test_credentials_inside_free_text_are_masked(text: str) -> None:
    out = redact_text(text)
    assert SECRET not in out and MASK in out


def test_jaas_values_inside_free_text_are_hidden_whole() -> None:
    assert redact_text(f"sasl.jaas.config={JAAS} next=1") == "sasl.jaas.config=*** next=1"
    assert redact_text(json.dumps({"sasl.jaas.config": JAAS, "b": 2})) == '{"sasl.jaas.config": ***, "b": 2}'


@pytest.mark.parametrize("text", [
    "no secrets: offset=5 partition=2",
    "sasl.oauthbearer.token.endpoint.url=https://idp/token",
    "TopicAuthorizationException: Not authorized to access topics: [orders]",
    "http://connect:8083/connectors?expand=status",
    "group demo-.* matched 12 groups; tokens: 3",
    "manual__2024-01-01T00:00:00+00:00",
])
def test_text_without_credentials_is_unchanged(text: str) -> None:
    assert redact_text(text) == text


def test_lone_surrogates_are_escaped_not_fatal() -> None:
    # RE2 matches UTF-8, and a lone surrogate has none: it comes back as its escape
    assert utf8("a\ud800b") == "a\\ud800b" and utf8("a😀") == "a😀"
    assert redact_text(f"password={SECRET}\ud800") == "password=***"
    assert redact({"k\udfff": "v\ud800"}) == {"k\\udfff": "v\\ud800"}


def test_secret_keys() -> None:
    for key in ("sasl.jaas.config", "listener.name.x.plain.sasl.jaas.config", "any.jaas.setting",
                "ssl.truststore.password", "ssl.key.pem", "Authorization", "X-Auth-Token", "api-key",
                "basic.auth.user.info", "ssl.keystore.key", "sasl.oauthbearer.client.credentials.client.secret"):
        assert is_secret_key(key), key
    for key in ("bootstrap.servers", "ssl.truststore.location", "sasl.mechanism", "topics", "groups"):
        assert not is_secret_key(key), key


def test_public_config_and_bootstrap() -> None:
    config = {"connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
              "source.cluster.sasl.jaas.config": JAAS, "source.cluster.my.jaas.setting": JAAS,
              "target.cluster.ssl.truststore.password": None,
              "target.cluster.bootstrap.servers": f"SASL_SSL://u:{SECRET}@b:9093", "tasks.max": 2}
    shown = public_config(config)
    assert SECRET not in repr(shown) and list(shown) == list(config)
    assert shown["source.cluster.my.jaas.setting"] == MASK and shown["target.cluster.ssl.truststore.password"] == MASK
    assert shown["tasks.max"] == 2
    assert public_bootstrap({"bootstrap.servers": "a:9092", "sasl.jaas.config": JAAS}) == HIDDEN
    assert public_bootstrap({"bootstrap.servers": "a:9092", "sasl.password": ""}) == "a:9092"
    assert public_bootstrap({"bootstrap.servers": f"http://u:{SECRET}@a:9092"}) == "http://u:***@a:9092"


# a digit first: no word of a template ("password", "token", …) can be the secret
_secrets = st.text(alphabet="abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789", min_size=8,
                   max_size=24).map(lambda s: "9" + s)
_TEMPLATES = [
    "password={s}", 'password="{s}"', "sasl.password: '{s}'", "http://user:{s}@host:8083/x",
    "sasl.jaas.config=" + JAAS.replace(SECRET, "{s}"), JAAS.replace(SECRET, "{s}"),
    "clientSecret=\"{s}\"", "Authorization: Bearer {s}", "token={s}",
    "-----BEGIN PRIVATE KEY-----\n{s}\n-----END PRIVATE KEY-----",
]


@settings(max_examples=300, deadline=None)
@given(prefix=st.text(max_size=40), suffix=st.text(max_size=40), secret=_secrets,
       template=st.sampled_from(_TEMPLATES), as_json=st.booleans())
def test_a_credential_in_any_text_is_masked(prefix: str, suffix: str, secret: str, template: str,
                                            as_json: bool) -> None:
    assume(secret not in prefix + suffix)
    text = f"{prefix} {template.format(s=secret)} {suffix}"
    if as_json:  # the same text inside a JSON document (quotes escaped), as a log line or an error carries it
        text = json.dumps({"message": text})
    assert secret not in redact_text(text)


# -- one rule for keys and text ------------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["pwd", "s3.access.key", "aws_secret_access_key", "KAFKA_SASL_PASSWORD", "clientSecret",
                                 "x-api-key", "apikey", "sasl.jaas.config", "basic.auth.user.info", "ssl.keystore.key",
                                 "Authorization", "X-Auth-Token", "client.credentials", "private_key", "ssl.key.pem"])
def test_a_secret_key_is_masked_in_a_dict_as_in_text(key: str) -> None:
    assert redact({key: SECRET}) == {key: MASK}
    assert SECRET not in redact_text(f"{key}={SECRET}") and SECRET not in redact_text(json.dumps({key: SECRET}))


@pytest.mark.parametrize("key", ["sasl.oauthbearer.token.endpoint.url", "tokens", "basic.auth.credentials.source",
                                 "bootstrap.servers", "ssl.truststore.location", "key.converter", "partition.key"])
def test_a_key_that_names_no_secret_is_shown_in_a_dict_as_in_text(key: str) -> None:
    assert redact({key: "v1"}) == {key: "v1"}
    assert redact_text(f"{key}=v1") == f"{key}=v1"


_key_parts = st.sampled_from(["", "sasl.", "consumer.override.", "ssl.", "KAFKA_", "my-", "source.cluster."])
_key_words = st.sampled_from(["password", "pwd", "secret", "token", "access.key", "api_key", "jaas.config", "user",
                              "endpoint.url", "tokens", "key", "location", "auth.user.info", "credentials"])


@given(prefix=_key_parts, word=_key_words)
def test_keys_and_text_follow_the_same_rule(prefix: str, word: str) -> None:
    key = prefix + word
    value = "9v" + "x" * 8
    assert is_secret_key(key) == (redact({key: value}) == {key: MASK}) == (value not in redact_text(f"{key}={value}"))


# -- log records --------------------------------------------------------------------------------------------
def test_mirrorbook_loggers_mask_credentials_in_messages_arguments_and_tracebacks(caplog) -> None:
    from mirrorbook.redaction import get_logger

    log = get_logger("mirrorbook.test_redaction")
    with caplog.at_level(logging.INFO, logger="mirrorbook.test_redaction"):
        log.info("calling %s with %s", f"http://ops:{SECRET}@connect:8083", {"sasl.jaas.config": JAAS})
        log.warning(f"refused: password={SECRET}")
        try:
            raise RuntimeError(f"401 from http://ops:{SECRET}@connect:8083")
        except RuntimeError:
            log.exception("the call failed")
        log.info("offset=5 partition=%d", 2)
    assert SECRET not in caplog.text and MASK in caplog.text
    assert [r.getMessage() for r in caplog.records][-1] == "offset=5 partition=2"
    assert "RuntimeError: 401 from http://ops:***@connect:8083" in caplog.text


def test_every_mirrorbook_module_logger_carries_the_filter() -> None:
    import importlib
    import pkgutil

    import mirrorbook
    from mirrorbook.redaction import REDACTING

    loggers = {}
    for info in pkgutil.walk_packages(mirrorbook.__path__, "mirrorbook."):
        module = importlib.import_module(info.name)
        loggers.update({f"{info.name}.{k}": v for k, v in vars(module).items() if isinstance(v, logging.Logger)})
    assert len(loggers) >= 10 and "mirrorbook.core.engine.log" in loggers
    assert [name for name, lg in loggers.items() if REDACTING not in lg.filters] == []
