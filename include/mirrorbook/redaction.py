"""What may be shown or kept of a value: never a credential. The one home of the rules, used by the audit
store (everything it writes), the flows API (connector configs, cluster addresses), reports and logs.

Two rules. A value under a secret-looking key (`sasl.jaas.config`, `ssl.truststore.password`,
`Authorization`, `basic.auth.user.info`, …) is replaced whole. Inside any string, credentials are
masked where they sit: URL userinfo (`http://user:pass@host`), PEM private keys, Basic/Bearer
credentials, `password=…`-style pairs under any secret-looking name (`KAFKA_SASL_PASSWORD=…`,
`clientSecret="…"`, JSON or repr text with escaped quotes) and whole JAAS settings written as text.

The text rules run on RE2 (linear time): Python's `re` needed minutes for the URL rule on a hostile
megabyte of `a.a.a.…`, and the audit store must record any request, however large, without stalling.
No Airflow import: the core, the plugin and the CLI share this module.
"""

from __future__ import annotations

import re
from typing import Any

import re2

MASK = "***"

# Substrings of a key (lower-cased, "-" read as "_") whose value is a secret.
SECRET_KEY_MARKERS = ("password", "passwd", "secret", "token", "jaas", "ssl.key.pem", "authorization", "credential",
                      "api_key", "apikey", "private_key", "privatekey", "private.key", "keystore.key",
                      "auth.user.info")
_SECRET_KEY = re.compile("|".join(map(re.escape, SECRET_KEY_MARKERS)))  # plain words: linear in `re`

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False
# A secret-looking name ends the key: `sasl.password`, `KAFKA_SASL_PASSWORD`, `clientSecret`, `x-api-key`;
# a closing quote may follow it, escaped when the text is JSON inside JSON.
_SECRET_NAME = (r"(?:password|passwd|pwd|secret|token|api[_\-]?key|access[_.\-]?key|private[_.\-]?key"
                r"|auth\.user\.info|authorization)")
# A value: quoted (also with JSON-escaped quotes, as in a config dumped inside a JSON string) or a bare word.
# A quote left open runs to the end: the text may have been cut inside the secret.
_VALUE = r"(?P<value>\\*\"[^\"]*(?:\"|$)|\\*'[^']*(?:'|$)|[^\s,;&\"']+)"
_TEXT_RULES = tuple((re2.compile(pattern, _OPTIONS), repl) for pattern, repl in (
    # a PEM private key, with its END line or, when the text was cut, to the end of its base64 body
    (r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY-----|[A-Za-z0-9+/=\s\\]*)",
     lambda m: MASK),
    (r"(?P<head>[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s/:@]+):[^\s/]*@", lambda m: f"{m['head']}:{MASK}@"),
    (r"(?i)\b(?P<scheme>basic|bearer)\s+[A-Za-z0-9+/=._~\-]{6,}", lambda m: f"{m['scheme']} {MASK}"),
    # a JAAS setting as text, whole: a quoted string (its options' quotes escaped, as in JSON), or the
    # bare value up to its closing `;` (quoted options may hold `;`)
    (r"(?i)(?P<key>\b[\w.\-]*jaas[\w.\-]*(?:\\*[\"'])?\s*[=:]\s*)"
     r"(?P<value>\"(?:[^\"\\]|\\.)*(?:\"|$)|'(?:[^'\\]|\\.)*(?:'|$)|(?:[^;\"\n]|\"[^\"\n]*\")*;?)",
     lambda m: f"{m['key']}{MASK}"),
    (rf"(?i)(?P<key>\b[\w.\-]*?{_SECRET_NAME}(?:\\*[\"'])?\s*[=:]\s*){_VALUE}", lambda m: f"{m['key']}{MASK}"),
))


# What the text rules need somewhere in the (lower-cased) text: one scan for these words decides whether
# they run at all. Most texts are ids and states without a credential, and five RE2 substitutions cost
# ~40 µs even on a short one; the store passes every value it keeps through here.
_RULE_WORDS = re.compile("|".join(map(re.escape, ("://", "private key", "basic", "bearer", "jaas", "pass", "pwd",
                                                  "secret", "token", "key", "auth"))))


def is_secret_key(key: str) -> bool:
    return _SECRET_KEY.search(key.lower().replace("-", "_")) is not None


def utf8(text: str) -> str:
    """`text` with lone surrogates as `\\udXXX` escapes: what UTF-8 (RE2, files, HTTP, databases) can carry.

    A lone surrogate is not a character: Python lets one into a str (`json.loads('"\\\\ud800"')`), but
    no UTF-8 output does, and pydantic refuses it in a str field.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def redact_text(text: str) -> str:
    """`text` with embedded credentials masked; unchanged when it has none (lone surrogates escaped)."""
    text = utf8(text)
    if not _RULE_WORDS.search(text.lower()):
        return text
    for rule, repl in _TEXT_RULES:
        text = rule.sub(repl, text)
    return text


def redact(value: Any) -> Any:
    """A copy of the JSON value `value` with every secret masked (structure kept; keys scrubbed as text)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {redact_text(k) if isinstance(k, str) else k: (MASK if v is not None and isinstance(k, str)
                                                              and is_secret_key(k) else redact(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value
