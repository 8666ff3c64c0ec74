"""The suite's own shape: a test whose every assertion sits in a loop that may run zero times passes on nothing.

Each such test checks first that its loop has something to check (a guard outside the loop). A loop over a literal
— `for x in (1, 2)`, `range(3)`, a local name bound once to a non-empty literal list — cannot be empty and needs none.
A property test (`@given`) may draw an example with nothing to loop over; it says how often its loop ran with
hypothesis' `event(...)`, which its statistics show (`pytest --hypothesis-show-statistics`).
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _nonempty_literal(node: ast.AST, bound: dict[str, ast.AST]) -> bool:
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return bool(node.elts)
    if isinstance(node, ast.Dict):
        return bool(node.keys)
    if isinstance(node, ast.Name) and node.id in bound:
        return _nonempty_literal(bound[node.id], {})
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id == "range":
            return all(isinstance(a, ast.Constant) for a in node.args)
        if node.func.id in ("zip", "enumerate", "sorted", "list", "tuple"):
            return bool(node.args) and all(_nonempty_literal(a, bound) for a in node.args)
    return False


def _assertions(node: ast.AST, in_loop: bool, bound: dict[str, ast.AST], out: list[bool]) -> list[bool]:
    """For each assertion (an `assert`, a `pytest.raises` block) under `node`: whether it sits in a loop that may
    run zero times. Nested functions are not this test's body."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(child, ast.Assert) or (
                isinstance(child, ast.With) and any("raises" in ast.unparse(i.context_expr) for i in child.items)):
            out.append(in_loop)
        may_skip = (isinstance(child, (ast.For, ast.AsyncFor)) and not _nonempty_literal(child.iter, bound)
                    or isinstance(child, ast.While))
        _assertions(child, in_loop or may_skip, bound, out)
    return out


def _bound_once(fn: ast.AST) -> dict[str, ast.AST]:
    names: dict[str, list[ast.AST]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            names.setdefault(node.targets[0].id, []).append(node.value)
    return {name: values[0] for name, values in names.items() if len(values) == 1}


def _counts_its_examples(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    given = any("given" in ast.unparse(d) for d in fn.decorator_list)
    return given and any(isinstance(n, ast.Call) and getattr(n.func, "id", "") == "event" for n in ast.walk(fn))


def loop_only_tests(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("test_*.py")):
        for fn in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name.startswith("test"):
                if _counts_its_examples(fn):
                    continue
                checks = _assertions(fn, False, _bound_once(fn), [])
                if checks and all(checks):
                    found.append(f"{path.relative_to(root.parent)}:{fn.lineno} {fn.name}")
    return found


def test_no_test_asserts_only_inside_a_loop_that_may_be_empty():
    assert loop_only_tests(TESTS) == []


def test_the_scan_finds_such_a_test_and_passes_a_guarded_one(tmp_path: Path):
    (tmp_path / "test_x.py").write_text(
        "def test_bad(items):\n    for i in items:\n        assert i\n\n"
        "def test_guarded(items):\n    assert items\n    for i in items:\n        assert i\n\n"
        "def test_literal():\n    cases = [1, 2]\n    for i in cases:\n        assert i\n    for j in range(3):\n"
        "        assert j >= 0\n\n"
        "@given(st.lists(st.integers()))\ndef test_property(xs):\n    for x in xs:\n        assert x == x\n"
        "    event(f'{len(xs)} checked')\n\n"
        "@given(st.lists(st.integers()))\ndef test_property_silent(xs):\n    for x in xs:\n        assert x == x\n")
    assert [f.split(" ")[1] for f in loop_only_tests(tmp_path)] == ["test_bad", "test_property_silent"]
