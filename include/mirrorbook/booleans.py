"""One reading of a yes/no written as text — connection extras, connector settings — and it is the one the
runbook forms already use (pydantic's): true/false, yes/no, on/off, 1/0, t/f, y/n, in any case, with the
spaces around it ignored."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError

_BOOL: TypeAdapter[bool] = TypeAdapter(bool)


def parse_bool(value: Any) -> bool | None:
    """True or False for a boolean or a word that says one; None for anything else (absent, empty, a path…),
    so that each caller decides what such a value means."""
    if isinstance(value, str):
        value = value.strip()
    try:
        return _BOOL.validate_python(value)
    except ValidationError:
        return None
