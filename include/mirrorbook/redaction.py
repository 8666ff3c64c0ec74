"""What may be shown or kept of a value: never a credential. The one home of the rules, used by the audit
store (everything it writes), the flows API (connector configs, cluster addresses), reports and logs.

Two rules. A value under a secret-looking key (`sasl.jaas.config`, `ssl.truststore.password`,
`Authorization`, `basic.auth.user.info`, …) is replaced whole. Inside any string, credentials are
masked where they sit: URL userinfo (`http://user:pass@host`), PEM private keys, Basic/Bearer
credentials, `password=…`-style pairs under any secret-looking name (`KAFKA_SASL_PASSWORD=…`,
`clientSecret="…"`, JSON or repr text with escaped quotes) and whole JAAS settings written as text.

The text rules run on RE2 (linear time): Python's `re` needed minutes for the URL rule on a hostile
megabyte of `a.a.a.…`, and the audit store must record any request, however large, without stalling.
Log records go through the same rules: every mirrorbook module takes its logger from `get_logger`, which
carries `RedactingFilter`. No Airflow import: the core, the plugin and the CLI share this module.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import re2

MASK = "***"

# The one rule of what names a secret, for a dict key and for a key written in text alike: a JAAS setting
# (the word anywhere in the key), or a key that ends in a secret word — `sasl.password`,
# `KAFKA_SASL_PASSWORD`, `clientSecret`, `x-api-key`, `s3.access.key`, `pwd` — in any case and with `.`,
# `_`, `-` or nothing between its parts. "Ends in" is what keeps `sasl.oauthbearer.token.endpoint.url`
# (a URL) and `tokens` (a count) shown.
_SECRET_WORD = (r"(?:password|passwd|pwd|secret|token|credentials?|authorization|auth[_.\-]?user[_.\-]?info"
                r"|api[_.\-]?key|access[_.\-]?key|private[_.\-]?key|keystore[_.\-]?key|key[_.\-]?pem)")
_JAAS = "jaas"
_SECRET_KEY = re.compile(rf"(?i){_JAAS}|{_SECRET_WORD}$")  # no nested repetition: linear in `re` too

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False
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
    (rf"(?i)(?P<key>\b[\w.\-]*{_JAAS}[\w.\-]*(?:\\*[\"'])?\s*[=:]\s*)"
     r"(?P<value>\"(?:[^\"\\]|\\.)*(?:\"|$)|'(?:[^'\\]|\\.)*(?:'|$)|(?:[^;\"\n]|\"[^\"\n]*\")*;?)",
     lambda m: f"{m['key']}{MASK}"),
    # a key the rule names, then its value
    (rf"(?i)(?P<key>\b[\w.\-]*?{_SECRET_WORD}(?:\\*[\"'])?\s*[=:]\s*){_VALUE}", lambda m: f"{m['key']}{MASK}"),
))


# What the text rules need somewhere in the (lower-cased) text: one scan for these words decides whether
# they run at all. Most texts are ids and states without a credential, and five RE2 substitutions cost
# ~40 µs even on a short one; the store passes every value it keeps through here.
_RULE_WORDS = re.compile("|".join(map(re.escape, ("://", "private key", "basic", "bearer", "jaas", "pass", "pwd",
                                                  "secret", "token", "credential", "key", "auth"))))


def is_secret_key(key: str) -> bool:
    """Whether a dict key names a secret: the same rule as a key written in text (`key=value`)."""
    return _SECRET_KEY.search(key.strip(" \"'")) is not None


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


class RedactingFilter(logging.Filter):
    """Masks credentials in a log record before any handler sees it: its message with the arguments merged
    in, and the text of its exception (kept in `exc_text`, which logging's formatters print instead of
    formatting the exception again). It never drops a record, and never fails one."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 — arguments that do not fit the message: logging reports those itself
            return True
        clean = redact_text(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            record.exc_text = redact_text(_TRACEBACKS.formatException(record.exc_info))
        return True


_TRACEBACKS = logging.Formatter()
REDACTING = RedactingFilter()


def get_logger(name: str) -> logging.Logger:
    """`logging.getLogger(name)` carrying `RedactingFilter`: how every mirrorbook module gets its logger (a
    filter on a logger applies to the records logged through it, whichever handlers they then reach)."""
    log = logging.getLogger(name)
    if REDACTING not in log.filters:
        log.addFilter(REDACTING)
    return log
