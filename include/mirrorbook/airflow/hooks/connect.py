"""KafkaConnectHook: a Connect REST client built from an Airflow `kafka_connect` connection."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from mirrorbook.airflow.provider import CONNECT_CONN_TYPE
from mirrorbook.booleans import parse_bool
from mirrorbook.connect import ConnectClient, ConnectSettings


def _extra(extra: dict[str, Any], name: str) -> Any:
    """conn-fields values may be stored plainly or with Airflow's `extra__<type>__` prefix."""
    return extra.get(name, extra.get(f"extra__{CONNECT_CONN_TYPE}__{name}"))


def _verify(value: Any) -> bool | str:
    """True, False, or the path of a CA bundle (anything that is not a yes/no); unset means verify."""
    if value is None or value == "":
        return True
    flag = parse_bool(value)
    return str(value) if flag is None else flag


def settings_from_connection(conn: Any) -> ConnectSettings:
    extra = conn.extra_dejson if hasattr(conn, "extra_dejson") else {}
    use_tls = _extra(extra, "use_tls")
    scheme = "https" if parse_bool(use_tls) or conn.schema == "https" else "http"
    host = conn.host or "localhost"
    if "://" in host:  # someone pasted a URL into the host field
        scheme, host = host.split("://", 1)
    url = f"{scheme}://{host}:{conn.port or 8083}"
    kw: dict[str, Any] = {"url": url, "verify": _verify(_extra(extra, "verify"))}
    if conn.login:
        kw.update(username=conn.login, password=conn.password or "")
    for field, key in (("client_cert", "client_cert"), ("client_key", "client_key")):
        if _extra(extra, key):
            kw[field] = _extra(extra, key)
    if _extra(extra, "timeout"):
        kw["timeout_s"] = float(_extra(extra, "timeout"))
    if _extra(extra, "retry_deadline"):
        kw["retry_deadline_s"] = float(_extra(extra, "retry_deadline"))
    return ConnectSettings(**kw)


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
