"""Bounds on what users send and on what we echo back.

Every boundary (DAG params, the plugin's API, the CLI, the topology file) checks the *size* of a value
before anything parses or compiles it — a million-character regex or a body nested 100,000 levels deep
is refused here, naming the parameter and the limit, instead of crashing the parser (RecursionError) or
holding a flow lock while a backtracking regex runs. And every user value echoed anywhere — an error
message, a task log, the audit trail, a page — goes through `shown`/`cut`, so a 1 MB input is echoed as 200
characters and its length, never in full (the path of keys to a value too: a key may be megabytes long).

JSON text from users is parsed by `loads` only: sizes and nesting first, and integers longer than
`max_digits` kept as their length (`HugeInt`) and refused by name, where Python would raise a ValueError past
4,300 digits. A key a boundary does not know is refused in one wording everywhere (`unknown_keys`: "unknown
parameter 'dryrun' — did you mean 'dry_run'?"), the runbooks' params and the plugin's API alike.

The walk over nested values is iterative: it cannot itself overflow the stack.
"""

from __future__ import annotations

import difflib
import json
import reprlib
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from mirrorbook.errors import Refused

ECHO_LIMIT = 200


class _Repr(reprlib.Repr):
    def repr_int(self, x: int, level: int) -> str:
        # repr() of an integer over 4,300 digits raises ValueError: say how long it is instead
        return f"<an integer of {_digits(x)} digits>" if abs(x).bit_length() > 3.32 * self.maxlong else \
            super().repr_int(x, level)


_repr = _Repr()  # Python 3.11's Repr takes no keyword arguments
_repr.maxlevel, _repr.maxdict, _repr.maxlist, _repr.maxtuple, _repr.maxset = 3, 8, 8, 8, 8
_repr.maxstring, _repr.maxother, _repr.maxlong = ECHO_LIMIT, ECHO_LIMIT, 40


def cut(text: str, limit: int = ECHO_LIMIT) -> str:
    """`text` itself when short; else its first `limit` characters, `…` and how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} chars)"


LISTED = 12  # items named per line, then "(+N more)"


def listed(items: Sequence[str], limit: int = LISTED) -> str:
    """The first `limit` items, comma-separated, then how many more there were: a line naming a thousand groups
    names twelve."""
    return ", ".join(items[:limit]) + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def _quoted(text: str, limit: int, quote: str) -> str:
    """`text` JSON-escaped between `quote`s, at most `limit` characters of it (an escape counts: a NUL takes
    6), then `… (N chars)` when it was longer."""
    inner = json.dumps(text[:limit], ensure_ascii=False)[1:-1]
    if len(text) <= limit and len(inner) <= limit:
        return f"{quote}{inner}{quote}"
    return f"{quote}{inner[:limit]}{quote}… ({len(text)} chars)"


def shown(value: Any, limit: int = ECHO_LIMIT) -> str:
    """A user value as it may be echoed: JSON-like for scalars, bounded in length and depth."""
    if isinstance(value, str):
        return _quoted(value, limit, '"')
    if isinstance(value, int) and not isinstance(value, bool) and abs(value).bit_length() > 3.32 * limit:
        return f"an integer of {_digits(value)} digits"  # its text would be huge (and Python refuses to make it)
    if value is None or isinstance(value, (bool, int, float)):
        return cut(json.dumps(value), limit)
    return cut(_repr.repr(value), limit)  # reprlib stops at maxlevel: deep nesting costs nothing


class InputTooLarge(Refused):
    """A value exceeds a size limit; refused before it is parsed, compiled or stored."""


# -- unknown keys: one wording and one suggestion for every boundary (runbook params, the plugin's API) ----

def quoted(name: Any, limit: int = ECHO_LIMIT) -> str:
    """A key as messages quote it: 'dryrun' — escaped (a NUL or a newline shows as \\u0000, \\n) and bounded."""
    if not isinstance(name, str):
        return shown(name, limit)
    return _quoted(name, limit, "'")


def closest(name: Any, known: Iterable[str]) -> str | None:
    """The known key `name` most likely misspells (case and punctuation aside), if any is close enough."""
    text = name if isinstance(name, str) else str(name)
    if len(text) > 100:  # no key is that long; difflib's cost grows with it
        return None
    close = difflib.get_close_matches(text.lower(), list(known), n=1, cutoff=0.6)
    return close[0] if close else None


def unknown_keys(keys: Iterable[Any], known: Sequence[str], what: str = "parameter") -> str | None:
    """"unknown parameter 'dryrun' — did you mean 'dry_run'?" for each key not in `known` (the first five
    named, the rest counted), or None when every key is known."""
    allowed = set(known)
    unknown = [k for k in keys if k not in allowed]
    if not unknown:
        return None
    said = [f"unknown {what} {quoted(k)}" + (f" — did you mean {quoted(c)}?" if (c := closest(k, known)) else "")
            for k in unknown[:5]]
    return "; ".join(said + ([f"and {len(unknown) - 5} more"] if len(unknown) > 5 else []))


# -- integers: JSON allows any length; Python refuses to convert more than 4,300 digits (a ValueError) ----

@dataclass(frozen=True)
class HugeInt:
    """A JSON integer too long to convert, kept as its length: `Limits.check` refuses it, naming where it is."""

    digits: int


def _digits(v: int) -> int:
    """How many digits `v` has, without converting it to text (which is what fails for huge ones)."""
    bits = abs(v).bit_length()
    if bits < 10_000:
        return len(str(abs(v)))
    return int(bits * 0.30103) + 1  # log10(2): exact to a digit, enough for a message


def loads(name: str, text: str, limits: "Limits") -> Any:
    """JSON text parsed within `limits`: its size and nesting are checked before the parser runs (it recurses
    once per level), integers are converted only when short enough, and the parsed value is checked as a
    whole (`Limits.check`: each string, key and integer, naming where a limit is crossed). Raises InputTooLarge,
    or json.JSONDecodeError for text that is not JSON (callers word that one for their input)."""
    limits.check_text(name, text)

    def integer(digits: str) -> int | HugeInt:
        n = len(digits.lstrip("-"))
        return HugeInt(n) if n > limits.max_digits else int(digits)

    value = json.loads(text, parse_int=integer)
    limits.check(name, value)
    return value


@dataclass(frozen=True)
class Limits:
    """How big one input may be. `max_depth` counts containers (a flat dict is depth 1); `max_string` bounds
    every string and key inside a value, `max_bytes` a value given as text (a body, a file, a JSON string)."""

    max_string: int = 1_000
    max_depth: int = 8
    max_items: int = 10_000
    max_bytes: int = 1_000_000
    max_digits: int = 100  # an integer's digits: offsets are 64-bit (19); Python itself stops at 4,300

    def check(self, name: str, value: Any) -> None:
        """Refuse `value` (the parameter `name`) if any bound is crossed; never recurses. Every message says
        where, bounded: the path of keys is cut like any echoed value (a key may be megabytes long)."""
        items = 0
        stack: list[tuple[Any, int, str]] = [(value, 0, cut(name))]
        while stack:
            v, depth, where = stack.pop()
            if isinstance(v, (str, bytes)):
                if len(v) > self.max_string:
                    raise InputTooLarge(f"`{cut(where)}` is {len(v)} characters long; the limit is {self.max_string}")
                continue
            if isinstance(v, HugeInt) or (isinstance(v, int) and not isinstance(v, bool)
                                          and abs(v).bit_length() > 3.32 * self.max_digits):
                digits = v.digits if isinstance(v, HugeInt) else _digits(v)
                if digits > self.max_digits:
                    raise InputTooLarge(f"`{cut(where)}` is an integer of {digits} digits; the limit is "
                                        f"{self.max_digits} digits")
                continue
            if isinstance(v, dict):
                children = list(v.items())
            elif isinstance(v, (list, tuple)):
                children = list(enumerate(v))
            else:
                continue
            depth += 1
            if depth > self.max_depth:
                raise InputTooLarge(f"`{cut(name)}` is nested more than {self.max_depth} levels deep "
                                    f"(at {cut(where, 80)})")
            items += len(children)
            if items > self.max_items:
                raise InputTooLarge(f"`{cut(name)}` holds more than {self.max_items} items")
            for key, child in children:
                if isinstance(key, str) and len(key) > self.max_string:
                    raise InputTooLarge(f"a key in `{cut(where)}` is {len(key)} characters long; "
                                        f"the limit is {self.max_string}")
                # the path stays short however long the keys: each is cut as it is added
                stack.append((child, depth, f"{where}.{cut(key, 40) if isinstance(key, str) else shown(key, 40)}"))

    def check_text(self, name: str, text: str | bytes) -> None:
        """A raw body or file, before it is parsed: its size, and how deeply its brackets nest."""
        if len(text) > self.max_bytes:
            raise InputTooLarge(f"`{cut(name)}` is {len(text)} bytes; the limit is {self.max_bytes}")
        raw = text.encode("utf-8", "replace") if isinstance(text, str) else text
        depth = deepest = 0
        in_string = escaped = False
        for byte in raw:  # JSON nesting, counted without parsing (json.loads recurses per level)
            if in_string:
                if escaped:
                    escaped = False
                elif byte == 0x5C:  # backslash
                    escaped = True
                elif byte == 0x22:  # quote
                    in_string = False
            elif byte == 0x22:
                in_string = True
            elif byte in (0x5B, 0x7B):  # [ {
                depth += 1
                deepest = max(deepest, depth)
                if deepest > self.max_depth:
                    raise InputTooLarge(f"`{cut(name)}` is nested more than {self.max_depth} levels deep")
            elif byte in (0x5D, 0x7D):
                depth -= 1


# What the runbook forms accept. Offsets bodies are the only deeply structured parameter (KIP-875:
# {"offsets": [{"partition": {...}, "offset": {...}}]} is depth 4); one entry per partition.
PARAM_LIMITS = Limits(max_string=1_000, max_depth=6, max_items=100_000, max_bytes=5_000_000)
# An offsets body is the one parameter that is large by nature: one entry per partition, so more items and, as
# text, megabytes. The strings and keys inside it are bounded like any other (a topic name is at most 249).
OFFSETS_LIMITS = Limits(max_string=1_000, max_depth=6, max_items=200_000, max_bytes=5_000_000)
# A whole run conf given as text (`mirrorbook trigger --conf`): one of its strings may be an offsets body; each
# member is then checked with its own parameter's limits.
CONF_LIMITS = Limits(max_string=OFFSETS_LIMITS.max_bytes, max_depth=OFFSETS_LIMITS.max_depth,
                     max_items=OFFSETS_LIMITS.max_items, max_bytes=OFFSETS_LIMITS.max_bytes)
PATTERN_MAX = 1_000  # characters of a group/flow regex
