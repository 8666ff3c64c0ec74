"""Provider info for the `apache_airflow_provider` entry point: registers the `kafka_connect` connection type.

Must import nothing from Airflow (the providers manager reads it without importing hooks).
"""

from __future__ import annotations

from typing import Any

import mirrorbook

CONNECT_CONN_TYPE = "kafka_connect"
# Every module of mirrorbook.airflow.operators that defines operators (tests/unit/test_provider.py checks it).
OPERATOR_MODULES = ("alerts", "approval", "connectors", "drill", "flow_events", "health", "move", "offsets", "parity",
                    "rpo", "runbook")


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "mirrorbook",
        "name": "mirrorbook",
        "description": "Disaster-recovery runbooks for Kafka MirrorMaker 2 (Kafka Connect REST API, KIP-875).",
        "versions": [mirrorbook.__version__],
        "integrations": [{"integration-name": "Kafka Connect", "tags": ["apache"]}],
        "hooks": [{"integration-name": "Kafka Connect",
                   "python-modules": ["mirrorbook.airflow.hooks.connect", "mirrorbook.airflow.hooks.mirrorbook"]}],
        "operators": [{"integration-name": "Kafka Connect",
                       "python-modules": [f"mirrorbook.airflow.operators.{m}" for m in OPERATOR_MODULES]}],
        "sensors": [{"integration-name": "Kafka Connect",
                     "python-modules": ["mirrorbook.airflow.sensors.alerts", "mirrorbook.airflow.sensors.connect",
                                        "mirrorbook.airflow.sensors.kafka"]}],
        "triggers": [{"integration-name": "Kafka Connect",
                      "python-modules": ["mirrorbook.airflow.triggers.alerts", "mirrorbook.airflow.triggers.connect",
                                          "mirrorbook.airflow.triggers.kafka",
                                          "mirrorbook.airflow.triggers.rpo"]}],
        "notifications": ["mirrorbook.airflow.notifiers.MirrorbookAlertNotifier"],
        "connection-types": [
            {
                "hook-class-name": "mirrorbook.airflow.hooks.connect.KafkaConnectHook",
                "hook-name": "Kafka Connect",
                "connection-type": CONNECT_CONN_TYPE,
                "ui-field-behaviour": {
                    "hidden-fields": ["schema"],
                    "relabeling": {"host": "Connect REST host", "port": "Connect REST port",
                                   "login": "Basic auth user", "password": "Basic auth password"},
                    "placeholders": {"host": "connect.example.com", "port": "8083"},
                },
                "conn-fields": {
                    "use_tls": {"label": "Use TLS (https)", "schema": {"type": ["boolean", "null"], "default": False}},
                    "verify": {"label": "Verify TLS certificate",
                               "description": "true, false, or the path of a CA bundle",
                               "schema": {"type": ["string", "null"], "default": "true"}},
                    "client_cert": {"label": "Client certificate (path, PEM)", "schema": {"type": ["string", "null"]}},
                    "client_key": {"label": "Client key (path, PEM)", "schema": {"type": ["string", "null"]}},
                    "timeout": {"label": "Request timeout (s)", "schema": {"type": ["number", "null"], "default": 30}},
                    "retry_deadline": {"label": "Retry deadline for 409/5xx (s)",
                                       "schema": {"type": ["number", "null"], "default": 30}},
                },
            }
        ],
    }
