"""Bounds on what users send and on what we echo back.

Every boundary (DAG params, the plugin's API, the CLI, the topology file) checks the *size* of a value
before anything parses or compiles it — a million-character regex or a body nested 100,000 levels deep
is refused here, naming the parameter and the limit, instead of crashing the parser (RecursionError) or
holding a flow lock while a backtracking regex runs. And every user value echoed anywhere — an error
message, a task log, the audit trail, a page — goes through `shown`, so a 1 MB input is echoed as 200
characters and its length, never in full.

The walk over nested values is iterative: it cannot itself overflow the stack.
"""

from __future__ import annotations

import json
import reprlib
from dataclasses import dataclass
from typing import Any

from mirrorbook.errors import Refused

ECHO_LIMIT = 200
_repr = reprlib.Repr()  # Python 3.11's Repr takes no keyword arguments
_repr.maxlevel, _repr.maxdict, _repr.maxlist, _repr.maxtuple, _repr.maxset = 3, 8, 8, 8, 8
_repr.maxstring, _repr.maxother, _repr.maxlong = ECHO_LIMIT, ECHO_LIMIT, 40


def cut(text: str, limit: int = ECHO_LIMIT) -> str:
    """`text` itself when short; else its first `limit` characters, `…` and how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} chars)"


def shown(value: Any, limit: int = ECHO_LIMIT) -> str:
    """A user value as it may be echoed: JSON-like for scalars, bounded in length and depth."""
    if isinstance(value, str):
        if len(value) <= limit:
            return json.dumps(value, ensure_ascii=False)
        return json.dumps(value[:limit], ensure_ascii=False) + f"… ({len(value)} chars)"
    if value is None or isinstance(value, (bool, int, float)):
        return cut(json.dumps(value), limit)
    return cut(_repr.repr(value), limit)  # reprlib stops at maxlevel: deep nesting costs nothing


class InputTooLarge(Refused):
    """A value exceeds a size limit; refused before it is parsed, compiled or stored."""


@dataclass(frozen=True)
class Limits:
    """How big one input may be. `max_depth` counts containers (a flat dict is depth 1)."""

    max_string: int = 1_000
    max_depth: int = 8
    max_items: int = 10_000
    max_bytes: int = 1_000_000

    def check(self, name: str, value: Any) -> None:
        """Refuse `value` (the parameter `name`) if any bound is crossed; never recurses."""
        depth_seen, items = 0, 0
        stack: list[tuple[Any, int, str]] = [(value, 0, name)]
        while stack:
            v, depth, where = stack.pop()
            if isinstance(v, (str, bytes)):
                if len(v) > self.max_string:
                    raise InputTooLarge(f"`{where}` is {len(v)} characters long; the limit is {self.max_string}")
                continue
            if isinstance(v, dict):
                children = list(v.items())
            elif isinstance(v, (list, tuple)):
                children = list(enumerate(v))
            else:
                continue
            depth += 1
            if depth > self.max_depth:
                raise InputTooLarge(f"`{name}` is nested more than {self.max_depth} levels deep "
                                    f"(at {cut(where, 80)})")
            depth_seen = max(depth_seen, depth)
            items += len(children)
            if items > self.max_items:
                raise InputTooLarge(f"`{name}` holds more than {self.max_items} items")
            for key, child in children:
                if isinstance(key, str) and len(key) > self.max_string:
                    raise InputTooLarge(f"a key in `{where}` is {len(key)} characters long; "
                                        f"the limit is {self.max_string}")
                stack.append((child, depth, f"{where}.{key}"))

    def check_text(self, name: str, text: str | bytes) -> None:
        """A raw body or file, before it is parsed: its size, and how deeply its brackets nest."""
        if len(text) > self.max_bytes:
            raise InputTooLarge(f"`{name}` is {len(text)} bytes; the limit is {self.max_bytes}")
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
                    raise InputTooLarge(f"`{name}` is nested more than {self.max_depth} levels deep")
            elif byte in (0x5D, 0x7D):
                depth -= 1


# What the runbook forms accept. Offsets bodies are the only deeply structured parameter (KIP-875:
# {"offsets": [{"partition": {...}, "offset": {...}}]} is depth 4); one entry per partition.
PARAM_LIMITS = Limits(max_string=1_000, max_depth=6, max_items=100_000, max_bytes=5_000_000)
PATTERN_MAX = 1_000  # characters of a group/flow regex
