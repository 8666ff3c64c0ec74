"""README.md and docs/: every command block is run, as written, by exactly one test that reads it (tests/docs.py),
or is a named exemption; the pages link to what exists; the README stays a ten-minute read."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

from mirrorbook.topology import Topology
from tests import docs

CLAIM = re.compile(r"^(?P<file>tests/[\w/]+\.py)::(?P<test>test_\w+)$")
LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def _command_blocks() -> list[docs.Block]:
    return [b for b in docs.all_blocks() if b.is_command]


def test_there_are_command_blocks_and_the_pages_they_live_in() -> None:
    pages = {b.path for b in _command_blocks()}
    assert len(_command_blocks()) >= 12 and {"README.md", "docs/operating.md", "docs/audit.md"} <= pages


def test_every_command_block_is_claimed_by_one_test_or_exempt_by_name() -> None:
    wrong = []
    for b in _command_blocks():
        if (b.claim is None) == (b.exempt is None):
            wrong.append(f"{b.where}: say `<!-- run by: tests/…py::test_… -->` or `<!-- not run: NAME -->` right "
                         "above the fence")
        elif b.claim is not None and not CLAIM.match(b.claim):
            wrong.append(f"{b.where}: {b.claim!r} is not tests/<path>.py::test_<name>")
        elif b.exempt is not None and b.exempt not in docs.EXEMPT:
            wrong.append(f"{b.where}: no exemption {b.exempt!r} in tests/docs.py EXEMPT")
    assert wrong == []


def test_comments_stand_only_above_command_blocks() -> None:
    """A `run by:` or `not run:` above a yaml or text block would claim nothing: it is a mistake."""
    assert [b.where for b in docs.all_blocks() if not b.is_command and (b.claim or b.exempt)] == []


def test_every_fence_says_what_it_holds() -> None:
    """Commands hide nowhere: a fence is bash (run), text (a synopsis, parsed), yaml or json — or, unlabelled, a
    picture (box-drawing lines, like the README's diagram)."""
    odd = [b.where for b in docs.all_blocks()
           if not (b.is_command or b.lang in ("text", "yaml", "json") or (not b.lang and re.search("[─│▼►]", b.text)))]
    assert odd == []


def _reads(module: ast.Module, function: ast.AST, key: str) -> bool:
    """Whether `function` names `key`: as a string, or by a module-level constant that holds it."""
    names = {t.id for n in module.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
             and n.value.value == key for t in n.targets if isinstance(t, ast.Name)}
    return any((isinstance(n, ast.Constant) and n.value == key) or (isinstance(n, ast.Name) and n.id in names)
               for n in ast.walk(function))


def test_every_claim_names_a_test_that_reads_its_block_through_the_harness() -> None:
    """The test named by a block exists and asks tests/docs.py for its blocks by its own id — so a block that moves
    or changes is what that test runs, and no test runs a copy of it."""
    wrong = []
    claims = {b.claim for b in _command_blocks() if b.claim}
    assert claims
    for claim in sorted(claims):
        m = CLAIM.match(claim)
        if not m:
            continue  # reported by the test above
        path = docs.REPO / m["file"]
        if not path.is_file():
            wrong.append(f"{claim}: no file {m['file']}")
            continue
        tree = ast.parse(path.read_text())
        functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == m["test"]]
        if len(functions) != 1:
            wrong.append(f"{claim}: {len(functions)} functions named {m['test']} in {m['file']}")
        elif not _reads(tree, functions[0], claim):
            wrong.append(f"{claim}: the test never asks tests/docs.py for {claim!r}")
    assert wrong == []


def test_every_exemption_is_used_and_says_what_checks_it_instead() -> None:
    used = {b.exempt for b in _command_blocks() if b.exempt}
    assert used == set(docs.EXEMPT), "an exemption nobody uses is a hole waiting to be used: remove it"
    for name, exemption in docs.EXEMPT.items():
        assert exemption.reason and (docs.REPO / exemption.checked_by.split(":")[0]).is_file(), name
    assert [ln for ln in (docs.REPO / ".ci" / "run").read_text().splitlines() if ln.startswith("exec ")] \
        == ["exec make test"]  # what checks the make-test block: CI runs exactly it


def test_every_yaml_block_parses_and_a_topology_example_is_a_topology() -> None:
    blocks = [b for b in docs.all_blocks() if b.lang == "yaml"]
    assert blocks
    topologies = 0
    for b in blocks:
        data = yaml.safe_load(b.text)
        assert isinstance(data, dict), b.where
        if "clusters" in data:
            Topology.model_validate(data)
            topologies += 1
    assert topologies >= 1


@pytest.mark.parametrize("page", docs.pages(), ids=lambda p: str(p.relative_to(docs.REPO)))
def test_every_relative_link_leads_somewhere(page: Path) -> None:
    """Files and headings: a newcomer who follows a link must land on what it names."""
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"^[a-z]+:", target):
            continue  # http(s), mailto: not ours to check here
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(target)
    assert broken == []


def _anchors(page: Path) -> set[str]:
    """GitHub's heading ids: lower case, punctuation but `-` and `_` dropped, spaces made `-`."""
    heads = re.findall(r"^#{1,6}\s+(.*)$", page.read_text(), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def test_the_readme_is_read_in_ten_minutes() -> None:
    lines = (docs.REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move depth into docs/"
