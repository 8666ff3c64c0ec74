"""KafkaConnectHook: a Connect REST client built from an Airflow `kafka_connect` connection (read by
`mirrorbook.connections.settings_from_connection`, which the CLI uses on a connections file too)."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from mirrorbook.airflow.provider import CONNECT_CONN_TYPE
from mirrorbook.connect import ConnectClient, ConnectSettings
from mirrorbook.connections import settings_from_connection


class KafkaConnectHook(BaseHook):
    """Talks to one Kafka Connect cluster's REST API (the one hosting a flow's MM2 connectors)."""

    conn_name_attr = "kafka_connect_conn_id"
    default_conn_name = "kafka_connect_default"
    conn_type = CONNECT_CONN_TYPE
    hook_name = "Kafka Connect"

    def __init__(self, kafka_connect_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kafka_connect_conn_id = kafka_connect_conn_id

    def settings(self) -> ConnectSettings:
        return settings_from_connection(self.get_connection(self.kafka_connect_conn_id))

    async def asettings(self) -> ConnectSettings:
        return settings_from_connection(await self.aget_connection(self.kafka_connect_conn_id))

    def get_conn(self) -> ConnectClient:
        return ConnectClient(self.settings())

    def test_connection(self) -> tuple[bool, str]:
        try:
            with self.get_conn() as client:
                info = client.root()
            return True, f"Kafka Connect {info.get('version', '?')} (cluster {info.get('kafka_cluster_id', '?')})"
        except Exception as exc:
            return False, str(exc)
