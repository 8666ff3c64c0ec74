"""Canonical forms of everything the store writes — JSON text, UTC timestamps, ids — identical on
every backend, so a hash computed at append time can be recomputed from the stored row years later.

And the one gate every value passes on its way into a table: `stored_row(table, values)` (lookups pass
the same gate, `stored(column, value)`, so they find what was written). The store records any request,
refused and hostile ones included, so whatever a caller sends is made storable here, never refused:

- escaped: NUL becomes the four characters `\\x00` (PostgreSQL text and varchar reject NUL; SQLite would
  keep it) and a lone surrogate its `\\udXXX` escape (no UTF-8 for it: neither backend, nor the digest,
  can encode it). A visible escape, not U+FFFD, so a reviewer sees what was sent, and which character;
  it reads like a literal backslash sequence, which the digest below tells apart for NUL. A lone
  surrogate is not a character (the models escape it before validation, as pydantic refuses it): its
  escape is the value, and a lock refuses it (`identity`).
- redacted: `mirrorbook.redaction`, before anything is cut (a cut can split a secret so no rule sees it).
- bounded: a short column (`String(n)`: flow, run id, user, …) keeps 200 characters + "… (N chars)";
  a long one (`Text`: error, note, path) 64 KiB; an audit JSON column (request, states, details,
  artifact summaries) at most 64 KiB of JSON, cut inside so it keeps its shape. Data the program reads
  back (snapshot payloads, run progress, metrics samples) is escaped and redacted, never cut.

Every short value the gate changed (cut, escaped or redacted) ends with ` #` and a digest of the value,
so two different flows or run ids never share one stored form: a lock on one flow is never a lock on
another, one run never passes for another. The digest is of the value as sent, or — when it carried a
credential — of its redacted form: the store keeps no digest of a secret (`identity` refuses such ids).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import time
from datetime import date, datetime, timezone
from enum import Enum
from typing import Any, Callable, Mapping

from pydantic import BaseModel
from sqlalchemy import Column, ColumnElement, Table

from mirrorbook.audit.errors import InvalidAuditData
from mirrorbook.bounds import ECHO_LIMIT, cut, shown
from mirrorbook.redaction import redact, redact_text, utf8

# Fixed width, so text comparison orders timestamps (range queries work on both backends).
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
TEXT_LIMIT = 64 * 1024  # characters of one long text or audit JSON column
JSON_DEPTH = 32  # nesting kept; an audit value nested deeper keeps that part as its bounded repr
# Column.info marks for JSON columns: what a caller describes (bounded) or what the program reads back (never cut)
AUDIT_JSON = {"json": "audit"}
DATA_JSON = {"json": "data"}
_TAG_BYTES = 16  # 128 bits of SHA-256: no two values share a tag, even chosen ones
_TAG_LEN = len(" #") + 22  # base64url of 16 bytes, unpadded
_B64URL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
_MIN_MEMBER = 24  # JSON characters that always hold a float, or a string cut to "… (N chars)"


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


def escaped(text: str) -> str:
    """`text` as both backends can store it: NUL as `\\x00`, lone surrogates as `\\udXXX`."""
    return utf8(text.replace("\x00", "\\x00") if "\x00" in text else text)


def utf8_tree(value: Any, depth: int = 0) -> Any:
    """`value` with lone surrogates escaped in every string, dict keys included (to JSON_DEPTH; deeper
    is left as is): what a pydantic str field accepts."""
    if isinstance(value, str):
        return utf8(value)
    if depth >= JSON_DEPTH:
        return value
    if isinstance(value, dict):
        return {utf8(k) if isinstance(k, str) else k: utf8_tree(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [utf8_tree(v, depth + 1) for v in value]
    return value


def _tagged(text: str) -> bool:
    tail = text[-_TAG_LEN:]
    return len(tail) == _TAG_LEN and tail.startswith(" #") and set(tail[2:]) <= _B64URL


def short_text(text: str, width: int | None = None) -> str:
    """What a `String(width)` column keeps of `text` (the module docstring says why and how)."""
    text = utf8(text)  # as the models do before validation: the same value, written or looked up
    clean = escaped(text)
    return _short(text, clean, redact_text(clean), width)


def _short(text: str, clean: str, public: str, width: int | None) -> str:
    """`public` (`text` escaped into `clean`, then redacted), bounded and, when it differs from `text`, tagged."""
    room = ECHO_LIMIT if width is None else min(ECHO_LIMIT, width)
    if public == text and len(text) <= room and not _tagged(text):
        return text
    source = text if public == clean else public
    digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).digest()[:_TAG_BYTES]
    tag = " #" + base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")
    room = ECHO_LIMIT if width is None else min(ECHO_LIMIT, width - _TAG_LEN)
    if len(public) <= room:
        return public + tag
    keep = room if width is None else min(room, width - _TAG_LEN - len(f"… ({len(public)} chars)"))
    return cut(public, max(0, keep)) + tag


def long_text(text: str, limit: int = TEXT_LIMIT) -> str:
    return cut(redact_text(escaped(text)), limit)


_PLAIN = (int, bool, type(None))


def where_text(where: Any) -> str:
    """A path as messages show it: `$.groups[3].topic`."""
    steps = []
    while isinstance(where, tuple):
        where, step = where
        steps.append(f"[{step}]" if isinstance(step, int) else f".{cut(step, 40)}")
    return str(where) + "".join(reversed(steps))


def jsonable(value: Any, where: Any = "$", too_deep: Callable[[Any, str], Any] | None = None,
             depth: int = 0) -> Any:
    """`value` as plain JSON types with every string escaped (keys too); refuses what JSON would silently
    change (non-string keys, NaN). A container nested deeper than JSON_DEPTH becomes `too_deep(it, where)`,
    or is refused when there is no `too_deep`: the walks that follow recurse, and must not overflow.

    Members that are plain numbers or strings are taken in the container's own loop, and a member's path is
    spelled out only for a message: a plan or a snapshot holds a hundred thousand of them."""
    if isinstance(value, BaseModel):
        return jsonable(value.model_dump(mode="json"), where, too_deep, depth)
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, str):
        return escaped(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidAuditData(f"{where_text(where)}: {value} is not valid JSON")
        return value
    if isinstance(value, Enum):
        return jsonable(value.value, where, too_deep, depth)
    if isinstance(value, datetime):
        return format_time(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, (dict, list, tuple)) and depth >= JSON_DEPTH:
        if too_deep is None:
            raise InvalidAuditData(f"{where_text(where)}: nested more than {JSON_DEPTH} levels deep")
        return too_deep(value, where_text(where))
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidAuditData(f"{where_text(where)}: key {shown(k)} is a {type(k).__name__}, JSON keys are "
                                       "strings", "convert keys with str() before storing (they would not read back "
                                       "equal)")
            kind = type(v)
            out[escaped(k)] = v if kind in _PLAIN else escaped(v) if kind is str else \
                jsonable(v, (where, k), too_deep, depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        return [v if type(v) in _PLAIN else escaped(v) if type(v) is str
                else jsonable(v, (where, i), too_deep, depth + 1)
                for i, v in enumerate(value)]
    raise InvalidAuditData(f"{where_text(where)}: a {type(value).__name__} is not JSON")


def dumps(value: Any) -> str:
    """Canonical JSON: sorted keys, no whitespace, UTF-8 kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def data_json(value: Any, where: str = "$") -> str:
    """Data the program reads back (a rollback, a resumed run): checked, escaped, redacted, canonical — never cut."""
    return dumps(redact(jsonable(value, where)))


def audit_json(value: Any, where: str = "$") -> str:
    """What a caller describes (a request, states, details): like `data_json`, then bounded to TEXT_LIMIT."""
    return dumps(_fit(_short_keys(redact(jsonable(value, where, _too_deep))), TEXT_LIMIT))


def _too_deep(value: Any, _where: str) -> str:
    return escaped(shown(value))  # reprlib stops at its own depth; redaction follows


def _short_keys(value: Any) -> Any:
    """Keys (escaped and redacted already) bounded like short values, so distinct keys stay distinct.
    Strings are left whole: `_fit` cuts each once, saying how long it was."""
    if isinstance(value, dict):
        return {_short(k, k, k, None): _short_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_short_keys(v) for v in value]
    return value


def _fit(value: Any, limit: int) -> Any:
    """`value`, shrunk until its canonical JSON is at most `limit` (>= _MIN_MEMBER) characters, keeping its
    shape: a string is cut; a container keeps its first members (all, unless they are too many) and says
    how many it left out; its room goes first to the small members (each keeps all it has), the big ones
    share the rest evenly — a request keeps its method, path and status, and its body gets what is left."""
    if len(dumps(value)) <= limit:
        return value
    if isinstance(value, str):
        return _fit_text(value, limit)
    if isinstance(value, dict):
        return dict(_fit_members(list(value.items()), limit, keyed=True))
    if isinstance(value, list):
        return [v for _, v in _fit_members(list(enumerate(value)), limit, keyed=False)]
    return _fit_text(dumps(value), limit)  # a number with more digits than any real one


def _fit_text(text: str, limit: int) -> str:
    lo, hi = 0, min(len(text), limit)  # the longest prefix whose cut form fits (escaping makes JSON longer)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(dumps(cut(text, mid))) <= limit:
            lo = mid
        else:
            hi = mid - 1
    best = cut(text, lo)
    return best if len(dumps(best)) <= limit else "…"


def _more(kept: int, total: int, keyed: bool) -> tuple[Any, Any]:
    """The member that says how many were left out."""
    return ("…", f"{total - kept} more") if keyed else (kept, f"… {total - kept} more")


def _fit_members(items: list[tuple[Any, Any]], limit: int, keyed: bool) -> list[tuple[Any, Any]]:
    def text_len(members: list[tuple[Any, Any]]) -> int:
        return len(dumps(dict(members) if keyed else [v for _, v in members]))

    n = len(items)
    sizes = [len(dumps(v)) for _, v in items]
    keys = [len(dumps(k)) + 1 if keyed else 0 for k, _ in items]
    marker = text_len([_more(0, n, keyed)]) - 2 + 1  # its text and a comma (the longest count: none kept)
    # Members kept: as many as can each have `floor` characters, or all they have if less — rather 1,500
    # whole offsets and a count of the rest than 50,000 offsets cut to nothing.
    floor = max(_MIN_MEMBER, min(256, limit // 16))
    need, kept = 2 + marker, 0
    while kept < n and need + keys[kept] + min(sizes[kept], floor) + 1 <= limit:
        need += keys[kept] + min(sizes[kept], floor) + 1
        kept += 1
    if kept == n:
        need -= marker
    left = limit - (need - sum(min(s, floor) for s in sizes[:kept]))
    shares = [0] * kept
    for rank, i in enumerate(sorted(range(kept), key=sizes.__getitem__)):  # smallest first: they keep it all
        shares[i] = min(sizes[i], left // (kept - rank))
        left -= shares[i]
    out = [(k, v if shares[i] >= sizes[i] else _fit(v, shares[i])) for i, (k, v) in enumerate(items[:kept])]
    if kept < n:
        out.append(_more(kept, n, keyed))
    return out if text_len(out) <= limit else []


def stored(column: Column[Any], value: Any) -> Any:
    """`value` as `column` keeps it (and as a lookup on `column` must ask for it)."""
    kind = column.info.get("json")
    if kind == AUDIT_JSON["json"]:
        return None if value is None else audit_json(value, column.name)
    if kind == DATA_JSON["json"]:
        return data_json(value, column.name)
    if isinstance(value, datetime):
        return format_time(value)
    if not isinstance(value, str):
        return value
    width = getattr(column.type, "length", None)
    return short_text(value, width) if width else long_text(value, column.info.get("limit", TEXT_LIMIT))


def shown_form(column: Column[Any], value: Any) -> bool:
    """Whether `value` may be what `column` showed for some other value (a changed, tagged short form,
    copied from a listing): storable as it is, tagged, and fitting the column."""
    width = getattr(column.type, "length", None)
    return (isinstance(value, str) and width is not None and len(value) <= width and _tagged(value)
            and escaped(value) == value)


def lookup(column: Column[Any], value: Any) -> ColumnElement[bool]:
    """The condition that finds `value` in `column` for a reader — the value as sent, or as the store
    showed it. Writes, and lookups that decide ownership (locks, progress), use `stored` alone."""
    key = stored(column, value)
    if key != value and shown_form(column, value):
        return column.in_([key, value])
    return column == key


def stored_row(table: Table, values: Mapping[str, Any]) -> dict[str, Any]:
    """The row as `table` keeps it: the one way a caller's values reach a table."""
    return {name: stored(table.c[name], value) for name, value in values.items()}


def identity(column: Column[Any], value: str) -> str:
    """`stored(column, value)` for a value that must stay distinct from every other (a lock's flow, its
    run id). Refused when it carries a credential (values differing only in a secret are stored alike:
    the store keeps no digest of a secret to tell them apart) or a lone surrogate (escaped like the
    text it is shown as; no database could have given it to a run)."""
    clean = escaped(value)
    if utf8(value) != value:
        raise InvalidAuditData(f"the {column.name} {shown(clean)} holds a lone surrogate, which is not a character",
                               "name it in valid Unicode")
    if redact_text(clean) != clean:
        raise InvalidAuditData(f"the {column.name} {shown(redact_text(clean))} carries a credential",
                               "credentials are never stored; use an id without one")
    return stored(column, value)


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
