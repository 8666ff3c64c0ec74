"""Whole-id regular expressions (consumer groups, flows), matched in linear time.

MM2's `groups` setting is a Java regex matched against the whole id (`Pattern.matches`); mirrorbook
keeps that meaning, but matches with RE2 (google-re2), whose run time is linear in the input: a pattern
such as `(a+)+$`, which backtracks for minutes in Python's `re`, cannot hold a flow lock. What RE2
cannot express (backreferences, look-around) is refused with a message saying so, before anything runs.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable

import re2

from mirrorbook.bounds import PATTERN_MAX, InputTooLarge, cut, shown
from mirrorbook.errors import Refused

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False   # RE2 would log the whole pattern to stderr: an unbounded echo
_OPTIONS.max_mem = 8 << 20    # a compiled program larger than this is refused, not built


HINT = ("patterns are matched in linear time (RE2 syntax): no backreferences or look-around; the whole id "
        "must match, as in MM2's `groups` setting")


class InvalidPattern(Refused):
    def __init__(self, message: str, hint: str | None = None, reason: str | None = None) -> None:
        super().__init__(message, hint)
        self.reason = reason or message  # what is wrong, without echoing the pattern


@lru_cache(maxsize=256)
def _compile(pattern: str) -> "re2._Regexp":
    return re2.compile(pattern, _OPTIONS)


def compile_whole_id(pattern: str, what: str = "groups") -> "re2._Regexp":
    """Compile `pattern` (the parameter `what`) or refuse it with the reason."""
    if not isinstance(pattern, str):
        raise InvalidPattern(f"`{what}` must be a regular expression (a string), got {shown(pattern)}")
    if len(pattern) > PATTERN_MAX:
        raise InputTooLarge(f"`{what}` is {len(pattern)} characters long; the limit for a pattern is {PATTERN_MAX}")

    try:
        return _compile(pattern)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        reason = cut(reason)  # RE2 quotes the offending part of the pattern: up to the whole of it
        raise InvalidPattern(f"`{what}` {shown(pattern)} is not a regular expression mirrorbook accepts: {reason}",
                             HINT, reason=f"not a regular expression mirrorbook accepts: {reason} ({HINT})")


def reason(exc: Refused) -> str:
    """What is wrong with a refused pattern, echoing at most RE2's bounded excerpt of it (for messages that name
    the field already)."""
    return exc.reason if isinstance(exc, InvalidPattern) else exc.message


def whole_id_matcher(pattern: str, what: str = "groups") -> Callable[[str], bool]:
    """Java `Pattern.matches` semantics (the whole id must match), like MM2's `groups` setting."""
    compiled = compile_whole_id(pattern, what)
    return lambda value: compiled.fullmatch(value) is not None
