"""CPython 3.12 inlines list, set and dict comprehensions (PEP 709). Its 3.12.1 here, and the GPU machine's 3.12,
raise UnboundLocalError where a function reads a global after a comprehension of that function bound the same name
as its target: the 2026-12-06 session's training candidates did so (`for block in ...`, then a call of the module's
`block(...)`) and failed on the GPU machine while CI (3.11) passed. This checks the package's source for it."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "rust_kernels"
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp)  # inlined in 3.12; generator expressions are not
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _targets(node: ast.AST) -> set[str]:
    return {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}  # type: ignore[attr-defined]


def _unbound_reads(node: ast.AST, name: str, bound: frozenset[str]) -> list[ast.Name]:
    """The reads of `name` under `node` that no enclosing comprehension, lambda or nested function binds."""
    if isinstance(node, (*COMPREHENSIONS, ast.GeneratorExp)):
        bound |= _targets(node)
    elif isinstance(node, (*FUNCTIONS, ast.Lambda)):
        bound |= {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
    if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load) and name not in bound:
        return [node]
    return [read for child in ast.iter_child_nodes(node) for read in _unbound_reads(child, name, bound)]


def hazards(source: str) -> list[str]:
    """'function: name' for each global a function reads after one of its comprehensions bound that name."""
    out = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, FUNCTIONS):
            continue
        nested = [n for n in ast.walk(fn) if isinstance(n, COMPREHENSIONS)]
        in_targets = {id(n) for c in nested for g in c.generators for n in ast.walk(g.target)}
        local = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
                 and id(n) not in in_targets}  # fmt: skip
        local |= {n.name for n in ast.walk(fn) if isinstance(n, FUNCTIONS) and n is not fn}
        local |= {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
        for name in sorted(set().union(*map(_targets, nested)) - local if nested else set()):
            first = min((c.lineno, c.col_offset) for c in nested if name in _targets(c))
            reads = [r for s in fn.body for r in _unbound_reads(s, name, frozenset())]
            if any((r.lineno, r.col_offset) > first for r in reads):
                out.append(f"{fn.name}: {name}")
    return out


def test_the_check_finds_the_pattern_and_passes_its_fixes():
    """3.12.1 raises in `broken` (v read after the first comprehension bound it) and runs the others."""
    broken = "def f(xs):\n    a = [g(v) for v in xs]\n    return a + [v for g in xs]\n"
    renamed = "def f(xs):\n    a = [g(u) for u in xs]\n    return a + [v for g in xs]\n"
    read_first = "def f(xs):\n    a = [g(1) for _ in xs]\n    return a + [1 for g in xs]\n"
    assert hazards(broken) == ["f: v"] and hazards(renamed) == hazards(read_first) == []


def test_no_function_of_the_package_reads_a_global_after_its_comprehensions_bound_it():
    found = [f"{path.relative_to(PACKAGE)}: {h}" for path in sorted(PACKAGE.rglob("*.py"))
             for h in hazards(path.read_text())]  # fmt: skip
    assert found == []
