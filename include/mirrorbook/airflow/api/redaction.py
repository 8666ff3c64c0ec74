"""What the flows API may show of Connect's and Kafka's configuration: never a secret.

Built on the audit store's redaction (secret-looking keys, credentials inside strings), plus the
rule that any JAAS setting is hidden whole whatever its key is called.
"""

from __future__ import annotations

from typing import Any, Mapping

from mirrorbook.audit.redaction import MASK, is_secret_key, redact, redact_text

HIDDEN = "hidden"


def _secret(key: str) -> bool:
    return is_secret_key(key) or "jaas" in key.lower()


def public_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A connector config with every secret value masked (keys kept, so the shape stays readable)."""
    return {k: (MASK if _secret(k) else redact_text(v) if isinstance(v, str) else redact(v))
            for k, v in config.items()}


def public_bootstrap(client_config: Mapping[str, Any]) -> str:
    """A cluster's bootstrap servers for `GET /`'s clusters map, or "hidden" when its client config
    carries any secret (SASL/JAAS, keys, passwords): then even the address is not ours to publish."""
    if any(_secret(k) and v not in (None, "") for k, v in client_config.items()):
        return HIDDEN
    return redact_text(str(client_config.get("bootstrap.servers", "")))
