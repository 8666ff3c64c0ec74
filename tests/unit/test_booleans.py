"""One reading of yes/no text: `mirrorbook.booleans.parse_bool`, the rule of the runbook forms, and the places
that read such text — the `kafka_connect` connection's `use_tls` and `verify`, which must agree."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from mirrorbook.booleans import parse_bool
from mirrorbook.runbooks.params import PauseResumeParams

TRUE = ["true", "True", " TRUE ", "yes", " yes", "on", "1", "t", "y", True, 1]
FALSE = ["false", "False", " false ", "no", "NO ", "off", "0", "f", "n", False, 0]
NEITHER = [None, "", "  ", "maybe", "/etc/ssl/ca.pem", "2", 2, "truthy"]


@pytest.mark.parametrize("value", TRUE)
def test_true_words(value):
    assert parse_bool(value) is True


@pytest.mark.parametrize("value", FALSE)
def test_false_words(value):
    assert parse_bool(value) is False


@pytest.mark.parametrize("value", NEITHER)
def test_anything_else_is_neither(value):
    assert parse_bool(value) is None


@given(st.sampled_from([v for v in TRUE + FALSE if isinstance(v, str)]))
def test_it_is_the_rule_the_runbook_forms_use(word):
    # a form's bool field (dry_run) reads the same word the same way
    assert PauseResumeParams.model_validate({"flow": "A->B", "dry_run": word.strip()}).dry_run is parse_bool(word)


@pytest.mark.parametrize("word", ["yes", " true ", "1", "on", "True"])
def test_use_tls_and_verify_read_a_yes_alike(word):
    from airflow.models.connection import Connection

    from mirrorbook.airflow.hooks.connect import settings_from_connection

    conn = Connection(conn_id="c", conn_type="kafka_connect", host="connect.example", port=8443,
                      extra={"use_tls": word, "verify": word})
    settings = settings_from_connection(conn)
    assert settings.url == "https://connect.example:8443" and settings.verify is True


@pytest.mark.parametrize("word", ["no", " false ", "0", "off"])
def test_use_tls_and_verify_read_a_no_alike(word):
    from airflow.models.connection import Connection

    from mirrorbook.airflow.hooks.connect import settings_from_connection

    conn = Connection(conn_id="c", conn_type="kafka_connect", host="connect.example", port=8083,
                      extra={"use_tls": word, "verify": word})
    settings = settings_from_connection(conn)
    assert settings.url == "http://connect.example:8083" and settings.verify is False


def test_verify_keeps_a_ca_bundle_path():
    from airflow.models.connection import Connection

    from mirrorbook.airflow.hooks.connect import settings_from_connection

    conn = Connection(conn_id="c", conn_type="kafka_connect", host="h", extra={"verify": "/etc/ssl/ca.pem"})
    assert settings_from_connection(conn).verify == "/etc/ssl/ca.pem"
    assert settings_from_connection(Connection(conn_id="d", conn_type="kafka_connect", host="h")).verify is True
