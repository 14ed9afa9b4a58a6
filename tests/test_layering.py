"""The layers stay apart and the project's modules import each other without cycles.

Read from the source (an AST walk of every module), so a layer breach is found even in a
branch no test runs. tests/runtime/test_isolation.py proves the same for runtime/ by
importing it with Django, Celery and the studio blocked.

What counts as an import:
- layering: every import statement anywhere in a module (module level, inside a function,
  under `if TYPE_CHECKING:`): a function-level `import django` in runtime/ is still a
  dependency on Django;
- cycles: every import too. An import moved into a function or under `if TYPE_CHECKING:`
  no longer fails at import time, but the two modules still need each other: that is how
  today's cycles are hidden (evals execute <-> tasks <-> limits by function-level imports,
  nodes <-> walker <-> loader under TYPE_CHECKING), and the point is to remove them, not
  hide them. Cycles that would fail at import time (module level, outside TYPE_CHECKING)
  are checked with no allowance at all. The edge goes to the module named
  (`from a.b import c` names `a.b.c` when that is a module, else `a.b`), not to the
  packages above it.
- `try: import <project module> / except ImportError:` is forbidden outright: the
  project's own modules are always there, and such a fallback hides a cycle or a breach.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ("runtime", "studio", "compiler")

# None allowed: every cycle among project modules (function-level and TYPE_CHECKING
# imports included) and every `try: import <own module> / except ImportError` fails.
KNOWN_CYCLES: list[frozenset[str]] = []
KNOWN_IMPORT_FALLBACKS: set[str] = set()


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the module imported, resolved to an absolute name
    line: int
    at_import_time: bool  # module level and not under `if TYPE_CHECKING:`


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for top in PROJECT:
        for path in sorted((ROOT / top).rglob("*.py")) if (ROOT / top).is_dir() else []:
            if "migrations" not in path.parts:
                found[_module_name(path)] = path
    return found


MODULES = _modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _imports(module: str, source: str, is_package: bool = False) -> Iterator[Import]:
    tree = ast.parse(source, filename=module)

    def walk(node: ast.AST, at_import_time: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield Import(module, alias.name, child.lineno, at_import_time)
            elif isinstance(child, ast.ImportFrom):
                base = _resolve(module, is_package, child)
                for alias in child.names:
                    name = f"{base}.{alias.name}"
                    target = name if name in MODULES else base
                    yield Import(module, target, child.lineno, at_import_time)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                yield from walk(child, False)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for part in child.body:
                    yield from walk(ast.Module(body=[part], type_ignores=[]), False)
                for part in child.orelse:
                    yield from walk(ast.Module(body=[part], type_ignores=[]), at_import_time)
            else:
                yield from walk(child, at_import_time)

    yield from walk(tree, True)


IMPORTS = [
    imp for module, path in MODULES.items() for imp in _imports(module, path.read_text(), path.name == "__init__.py")
]


def _top(name: str) -> str:
    return name.split(".")[0]


def _breaches(layer: str, forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{imp.module}:{imp.line} imports {imp.target}"
        for imp in IMPORTS
        if _top(imp.module) == layer and _top(imp.target) in forbidden
    )


def test_it_finds_the_project_modules() -> None:
    assert "runtime.walker" in MODULES and "studio.settings" in MODULES
    assert any(imp.module == "runtime.walker" and _top(imp.target) == "runtime" for imp in IMPORTS)


def test_it_keeps_django_celery_and_the_other_layers_out_of_runtime() -> None:
    forbidden = ("django", "celery", "ninja", "django_htmx", "kombu", "redis", "psycopg", "studio", "compiler")
    assert _breaches("runtime", forbidden) == []


def test_it_keeps_the_studio_out_of_the_compiler() -> None:
    assert _breaches("compiler", ("studio", "django", "celery")) == []


def test_it_keeps_the_studio_and_the_compiler_on_the_runtimes_public_api() -> None:
    """Above the runtime, code imports `runtime` itself (its pinned `__all__`), never one
    of its modules: the public API is the contract, the modules are free to move."""
    reaching_in = sorted(
        f"{imp.module}:{imp.line} imports {imp.target}"
        for imp in IMPORTS
        if _top(imp.module) in ("studio", "compiler") and imp.target.startswith("runtime.")
    )
    assert reaching_in == []


# The MCP SDK is an optional extra (docs/tools.md, "MCP"): only the modules that serve
# MCP import it, and only inside the functions that serve, so nothing loads it at start-up.
MCP_SDK = ("mcp", "mcp_types")
MCP_MODULES = {"runtime.mcp_server"}  # the studio reaches it through runtime.mcp_answer_http


def test_it_imports_the_mcp_sdk_lazily_and_only_where_mcp_is_served() -> None:
    found = [imp for imp in IMPORTS if _top(imp.target) in MCP_SDK]
    assert "runtime.mcp_server" in {imp.module for imp in found}  # the walk sees them
    assert {imp.module for imp in found} <= MCP_MODULES
    assert [f"{imp.module}:{imp.line} imports {imp.target}" for imp in found if imp.at_import_time] == []


def _cycles(only_at_import_time: bool = False) -> list[frozenset[str]]:
    """Strongly connected components of the import graph with more than one module (or a
    module importing itself); Tarjan's algorithm, iterative."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for imp in IMPORTS:
        if imp.target in MODULES and (imp.at_import_time or not only_at_import_time):
            graph[imp.module].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in graph[node]:
                        found.append(frozenset(component))
    return found


def test_it_has_no_cycles_at_import_time() -> None:
    assert [_show(c) for c in _cycles(only_at_import_time=True)] == []


def _show(cycle: frozenset[str]) -> str:
    return "{" + ", ".join(sorted(cycle)) + "}"


def test_it_has_no_import_cycles_beyond_the_known_ones() -> None:
    cycles = _cycles()
    new = [_show(c) for c in cycles if not any(c <= known for known in KNOWN_CYCLES)]
    assert new == [], "import cycles among project modules (module-level imports):\n" + "\n".join(new)
    gone = [_show(k) for k in KNOWN_CYCLES if not any(c <= k for c in cycles)]
    assert gone == [], "these cycles are gone: remove them from KNOWN_CYCLES:\n" + "\n".join(gone)


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError") for n in names)


def _import_fallbacks() -> set[str]:
    found = set()
    for module, path in MODULES.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not (isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers)):
                continue
            for stmt in node.body:
                for inner in ast.walk(stmt):
                    if isinstance(inner, ast.Import):
                        targets = [a.name for a in inner.names]
                    elif isinstance(inner, ast.ImportFrom):
                        targets = [_resolve(module, is_package, inner)]
                    else:
                        continue
                    if any(_top(t) in PROJECT for t in targets):
                        found.add(f"{module}:{inner.lineno}")
    return found


def test_it_has_no_import_error_fallbacks_for_the_projects_own_modules() -> None:
    found = _import_fallbacks()
    modules = {place.split(":")[0] for place in found}
    new = sorted(place for place in found if place.split(":")[0] not in KNOWN_IMPORT_FALLBACKS)
    assert new == [], "`try: import <own module> / except ImportError` fallbacks"
    assert sorted(KNOWN_IMPORT_FALLBACKS - modules) == [], "gone: remove them from KNOWN_IMPORT_FALLBACKS"


@pytest.mark.parametrize(
    "source",
    ["import django\n", "def f():\n    from studio import settings\n", "from ..studio import x\n"],
)
def test_it_sees_a_breach_in_a_runtime_module(source: str) -> None:
    """The walk itself: a Django or studio import, at module level or in a function, is found."""
    found = {_top(i.target) for i in _imports("runtime.walker", source)}
    assert found & {"django", "studio"}


def test_it_keeps_shared_test_helpers_in_tests_support() -> None:
    """A test module imports helpers from tests.support, never from another test module or
    a conftest (pytest finds fixtures by itself; a helper two modules need is support)."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if "support" in path.relative_to(ROOT / "tests").parts[:1]:
            continue
        module = _module_name(path)
        for imp in _imports(module, path.read_text(), path.name == "__init__.py"):
            if imp.target.startswith("tests.") and not imp.target.startswith("tests.support"):
                found.append(f"{module}:{imp.line} imports {imp.target}")
    assert found == []
