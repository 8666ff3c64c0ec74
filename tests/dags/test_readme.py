"""Every `mirrorbook …` line of README.md and docs/, in a command block or a synopsis, parses with the CLI's own
parser (synopsis brackets `[--flag]` and `a | b` alternatives are read as the options and commands they name): a
newcomer copies them, so they must be what the code accepts. The blocks themselves are run, as written, by the tests
that claim them (tests/docs.py; tests/unit/test_docs.py checks every block is claimed)."""

from __future__ import annotations

import re
import shlex

import pytest

from mirrorbook.cli import build_parser
from tests import docs


def _cli_commands() -> list[tuple[str, str]]:
    """(where, command) for every `mirrorbook` line, each alternative of a synopsis on its own."""
    out: list[tuple[str, str]] = []
    for entry in docs.cli_lines():
        where, line = entry.split(": ", 1)
        line = re.sub(r"\[([^\]]*)\]", r"\1", line)
        first, *alternatives = [part.strip() for part in line.split(" | ")]
        out.append((where, first))
        prefix = " ".join(first.split()[:2])
        out += [(where, f"{prefix} {alt}") for alt in alternatives]
    return out


def test_the_pages_have_command_lines_to_check() -> None:
    commands = _cli_commands()
    assert len(commands) >= 25 and {w.split(":")[0] for w, _ in commands} >= {"README.md", "docs/devstack.md",
                                                                              "docs/audit.md", "docs/secured.md"}


@pytest.mark.parametrize("where,command", _cli_commands())
def test_every_mirrorbook_command_in_the_docs_parses(where: str, command: str) -> None:
    argv = shlex.split(command)[1:]
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse's way of saying "no such command or option"
        pytest.fail(f"{where}: command does not parse: {command!r} (exit {exc.code})")
