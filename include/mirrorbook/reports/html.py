"""One HTML templating for everything mirrorbook renders — the DR drill report and the plugin's pages:
Jinja2 with autoescape on, undefined names an error, one base template (`base.html`: the shared CSS,
no script, nothing fetched) and the filters the templates share.

Every value reaches the HTML escaped. The one exception is `chart()`: an SVG chart that
`mirrorbook.reports.svg` built from numbers (escaping its texts itself), marked safe where it is built.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from mirrorbook.bounds import cut

TEMPLATES = Path(__file__).parent / "templates"
NONE = "—"


def fmt(value: Any, unit: str = "") -> str:
    """A figure as a report shows it: floats to two decimals, a missing one as a dash."""
    if value is None:
        return NONE
    if isinstance(value, datetime):
        return when(value)
    return f"{value:.2f}{unit}" if isinstance(value, float) else f"{value}{unit}"


def when(at: datetime | None) -> str:
    return NONE if at is None else at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def age(seconds: float | None) -> str:
    """A duration as someone under stress reads it: seconds, then minutes, then hours, then days."""
    if seconds is None:
        return NONE
    s = max(0.0, float(seconds))
    if s < 100:
        return f"{s:.0f} s"
    if s < 100 * 60:
        return f"{s / 60:.0f} min"
    if s < 48 * 3600:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


def chart(svg: str) -> Markup:
    """An SVG chart from `mirrorbook.reports.svg` (numbers, and texts it escaped): inserted as markup."""
    return Markup(svg)


def environment(*dirs: Path) -> Environment:
    """Templates from `dirs`, then the shared ones (`base.html`)."""
    env = Environment(loader=FileSystemLoader([*dirs, TEMPLATES]), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters.update(fmt=fmt, when=when, age=age, cut=cut)
    return env
