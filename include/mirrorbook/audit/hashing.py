"""The hash chain: each event's hash covers all its stored fields and its predecessor's hash."""

from __future__ import annotations

import hashlib
from typing import Any, Mapping

from mirrorbook.audit.codec import dumps

GENESIS_HASH = "0" * 64
CHAIN_FIELDS_EXCLUDED = ("hash", "prev_hash")
BOOLEAN_FIELDS = ("mutating",)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def event_hash(stored: Mapping[str, Any], prev_hash: str) -> str:
    """SHA-256 of the canonical JSON of the row as stored (JSON columns as their text) plus `prev_hash`.

    Hashing the stored form, not the model, means verification needs nothing but the row.
    """
    body = {k: v for k, v in stored.items() if k not in CHAIN_FIELDS_EXCLUDED}
    for k in BOOLEAN_FIELDS:  # SQLite hands booleans back as 0/1 to untyped (raw SQL) readers
        if k in body:
            body[k] = bool(body[k])
    return digest(dumps({"event": body, "prev_hash": prev_hash}))
