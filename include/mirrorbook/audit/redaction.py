"""Secret scrubbing applied by the store to everything it writes: callers are never trusted to do it.

Two rules: a value under a secret-looking key is replaced whole; inside any string, URL credentials
(`http://user:pass@host`), `password=…`-style pairs (JAAS configs, DSNs) and Basic/Bearer
credentials are masked.
"""

from __future__ import annotations

import re
from typing import Any

from mirrorbook.kafka.config import SECRET_KEYS

MASK = "***"
SECRET_KEY_MARKERS = tuple(dict.fromkeys(
    (*SECRET_KEYS, "passwd", "authorization", "credential", "api_key", "apikey", "private_key", "privatekey",
     "private.key", "keystore.key", "auth.user.info")))

_URL_USERINFO = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s/:@]+):[^\s/]*@")
_PAIR = re.compile(r"(?i)(?P<key>\b(?:password|passwd|secret|token|api[_-]?key)\b[\"']?\s*[=:]\s*)"
                   r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s,;&\"']+)")
_AUTH_SCHEME = re.compile(r"(?i)\b(?P<scheme>basic|bearer)\s+[A-Za-z0-9+/=._~\-]{6,}")


def is_secret_key(key: str) -> bool:
    k = key.lower().replace("-", "_")
    return any(marker in k for marker in SECRET_KEY_MARKERS)


def redact_text(text: str) -> str:
    """`text` with embedded credentials masked; unchanged when it has none."""
    text = _URL_USERINFO.sub(lambda m: f"{m['head']}:{MASK}@", text)
    text = _PAIR.sub(lambda m: f"{m['key']}{MASK}", text)
    return _AUTH_SCHEME.sub(lambda m: f"{m['scheme']} {MASK}", text)


def redact(value: Any) -> Any:
    """A copy of the JSON value `value` with every secret masked (keys kept, structure kept)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: (MASK if v is not None and is_secret_key(k) else redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value
