"""What the flows API may show of Connect's and Kafka's configuration: never a secret.

Built on `mirrorbook.redaction` (secret-looking keys, JAAS settings whatever their key is called,
credentials inside strings).
"""

from __future__ import annotations

from typing import Any, Mapping

from mirrorbook.redaction import MASK, is_secret_key, redact, redact_text

HIDDEN = "hidden"


def public_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A connector config with every secret value masked (keys kept, so the shape stays readable)."""
    return {k: (MASK if is_secret_key(k) else redact(v)) for k, v in config.items()}


def public_bootstrap(client_config: Mapping[str, Any]) -> str:
    """A cluster's bootstrap servers for `GET /`'s clusters map, or "hidden" when its client config
    carries any secret (SASL/JAAS, keys, passwords): then even the address is not ours to publish."""
    if any(is_secret_key(k) and v not in (None, "") for k, v in client_config.items()):
        return HIDDEN
    return redact_text(str(client_config.get("bootstrap.servers", "")))
