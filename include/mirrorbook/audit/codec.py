"""Canonical forms of everything the store writes — JSON text, UTC timestamps, ids — identical on
every backend, so a hash computed at append time can be recomputed from the stored row years later."""

from __future__ import annotations

import json
import math
import os
import time
from datetime import date, datetime, timezone
from enum import Enum
from typing import Any

from pydantic import BaseModel

from mirrorbook.audit.errors import InvalidAuditData
from mirrorbook.redaction import redact

# Fixed width, so text comparison orders timestamps (range queries work on both backends).
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def to_utc(dt: datetime) -> datetime:
    """Aware datetimes only: a naive one is ambiguous, and the audit trail must not guess."""
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError(f"timezone-aware datetime required, got naive {dt.isoformat()}")
    return dt.astimezone(timezone.utc)


def format_time(dt: datetime) -> str:
    return to_utc(dt).strftime(TIME_FORMAT)


def parse_time(text: str) -> datetime:
    return datetime.strptime(text, TIME_FORMAT).replace(tzinfo=timezone.utc)


def jsonable(value: Any, where: str = "$") -> Any:
    """`value` as plain JSON types; refuses what JSON would silently change (non-string keys, NaN)."""
    if isinstance(value, BaseModel):
        return jsonable(value.model_dump(mode="json"), where)
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidAuditData(f"{where}: {value} is not valid JSON")
        return value
    if isinstance(value, Enum):
        return jsonable(value.value, where)
    if isinstance(value, datetime):
        return format_time(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidAuditData(f"{where}: key {k!r} is a {type(k).__name__}, JSON keys are strings",
                                       "convert keys with str() before storing (they would not read back equal)")
            out[k] = jsonable(v, f"{where}.{k}")
        return out
    if isinstance(value, (list, tuple)):
        return [jsonable(v, f"{where}[{i}]") for i, v in enumerate(value)]
    raise InvalidAuditData(f"{where}: a {type(value).__name__} is not JSON")


def dumps(value: Any) -> str:
    """Canonical JSON: sorted keys, no whitespace, UTF-8 kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def stored_json(value: Any, where: str = "$") -> str:
    """The one way a caller's value becomes stored text: checked, redacted, canonical."""
    return dumps(redact(jsonable(value, where)))


def dumps_or_none(value: Any) -> str | None:
    return None if value is None else dumps(value)


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def new_id(prefix: str) -> str:
    """`<prefix>-<ULID>`: unique across processes and sortable by creation time (48-bit ms + 80 random bits)."""
    n = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[n & 31])
        n >>= 5
    return f"{prefix}-{''.join(reversed(chars))}"
