"""The fenced blocks of README.md and docs/: every command block is run, as written, by exactly one test.

A command block (```bash) says who runs it on the line right above its fence:

    <!-- run by: tests/e2e/test_api_recipes.py::test_the_readmes_rest_recipe_starts_a_run -->

and that test reads it through this module, with the same id as a string: `docs.block("tests/e2e/…::test_…")`
(tests/unit/test_docs.py checks both ends: every command block claimed once, every claim naming a test function
that asks for it). A block that cannot run where mirrorbook is built and tested says so instead, naming an entry
of EXEMPT (its reason, and what checks it in its place):

    <!-- not run: docker-compose -->

Synopses — `mirrorbook devstack up [--reverse]`, alternatives `a | b`, placeholders — are ```text blocks: they are
not run, but every `mirrorbook` line of them and of the command blocks parses with the CLI's own parser
(tests/dags/test_readme.py).

What a test changes in a block before running it is its own and minimal — the address of the server it runs
against, a password the block leaves as "…", a run dir, a long-running command replaced by a short-lived one —
and the test says which.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMAND_LANGS = frozenset({"bash", "sh", "shell", "console", "zsh"})  # every one of them must be claimed
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w-]*)\s*$")
RUN_BY = re.compile(r"^\s*<!--\s*run by:\s*(?P<test>\S+)\s*-->\s*$")
NOT_RUN = re.compile(r"^\s*<!--\s*not run:\s*(?P<name>[\w-]+)\s*-->\s*$")


@dataclass(frozen=True)
class Exemption:
    reason: str
    checked_by: str  # a path of the repository, then what it checks


EXEMPT = {
    "docker-compose": Exemption(
        reason="no Docker engine and no compose plugin on the machines mirrorbook is built and tested on",
        checked_by="tests/unit/test_compose.py: docker-compose.yml, docker-compose.secure.yml, the rendered configs "
                   "and the packaged topology against what the devstack runs, so the two cannot drift"),
    "make-test": Exemption(
        reason="`make test` is the suite itself: no test can run the suite it is part of",
        checked_by=".ci/run: CI runs exactly `make test` on a clean checkout"),
}


@dataclass(frozen=True)
class Block:
    path: str  # relative to the repository
    line: int  # the opening fence's, 1-based
    lang: str
    text: str  # the body, its list indentation removed
    claim: str | None = None  # `run by:` — the test that runs it
    exempt: str | None = None  # `not run:` — a key of EXEMPT

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def is_command(self) -> bool:
        return self.lang in COMMAND_LANGS

    def commands(self) -> list[str]:
        """The block's command lines: continuations joined, comments (` #…`) and blank lines dropped."""
        joined = re.sub(r"\\\n\s*", " ", self.text)
        return [ln.split(" #", 1)[0].strip() for ln in joined.splitlines() if ln.split(" #", 1)[0].strip()]


def pages() -> list[Path]:
    """README.md, then every page under docs/ (sorted)."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def parse(path: Path) -> list[Block]:
    rel = str(path.relative_to(REPO))
    lines = path.read_text().splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, lang = opening["indent"], opening["lang"]
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
        if end is None:
            raise ValueError(f"{rel}:{i + 1}: a ``` fence that is never closed")
        body = "".join(ln[len(indent):] + "\n" if ln.startswith(indent) else ln.lstrip() + "\n"
                       for ln in lines[i + 1:end])
        above = lines[i - 1] if i else ""
        claim, exempt = RUN_BY.match(above), NOT_RUN.match(above)
        out.append(Block(path=rel, line=i + 1, lang=lang, text=body, claim=claim["test"] if claim else None,
                         exempt=exempt["name"] if exempt else None))
        i = end + 1
    return out


@cache
def all_blocks() -> tuple[Block, ...]:
    return tuple(b for page in pages() for b in parse(page))


def blocks(test: str) -> list[Block]:
    """The blocks `test` ("tests/…py::test_name") runs, in the order a reader meets them."""
    found = [b for b in all_blocks() if b.claim == test]
    if not found:
        raise LookupError(f"no block of README.md or docs/ says `<!-- run by: {test} -->`")
    return found


def block(test: str, containing: str = "") -> Block:
    """The one block `test` runs that contains `containing`."""
    found = [b for b in blocks(test) if containing in b.text]
    if len(found) != 1:
        raise LookupError(f"{len(found)} blocks run by {test} contain {containing!r}: {[b.where for b in found]}")
    return found[0]


def page(rel: str) -> str:
    """The text of one page, e.g. "docs/operating.md"."""
    return (REPO / rel).read_text()


def yaml_blocks(rel: str) -> list[str]:
    return [b.text for b in all_blocks() if b.path == rel and b.lang == "yaml"]


def cli_lines() -> list[str]:
    """Every `mirrorbook …` line of the command blocks and the synopses (```text), where it is. (An unlabelled
    fence is a picture — the README's diagram — not commands.)"""
    return [f"{b.where}: {ln}" for b in all_blocks() if b.is_command or b.lang == "text"
            for ln in b.commands() if ln.startswith("mirrorbook ")]
