"""Node kinds are slices: one module each, one registry table. A kind added to the table
is loaded, checked, run, drawn and scored without a change anywhere else."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime import NODE_KINDS, NODE_SHAPES, ModelCall, ModelReply, Node, load_pack, run_pack
from runtime.nodes.base import LoadContext, NodeDrawing, Outcome, RunContext
from runtime.report import mermaid
from tests.support.runtime_packs import write_pack

RUNTIME = Path(__file__).resolve().parents[2] / "runtime"


class NoModel:
    spec = "none"

    def complete(self, call: ModelCall) -> ModelReply:
        raise AssertionError("a stamp node asks no model")

    def close(self) -> None:
        pass


class StampKind:
    """A kind that writes a fixed value: the smallest kind there is."""

    name = "stamp"
    keys = frozenset({"value"})
    drawing = NodeDrawing(shape="hexagon", css_class="node-stamp", label="stamp", mermaid=("{{", "}}"))
    terminal = False
    can_fail = False
    waits = False
    asks_model = False

    def load(self, node: Node, spec: dict[str, Any], loader: LoadContext) -> None:
        if len(node.writes) != 1:
            loader.error(f"stamp node '{node.id}' writes exactly one field", "nodes", node.id, "writes")
        node.config = str(spec.get("value", ""))

    def run(self, node: Node, walk: RunContext) -> Outcome:
        return Outcome("ok", writes={node.writes[0]: node.config})


@pytest.fixture
def stamp() -> Iterator[None]:
    NODE_KINDS["stamp"] = StampKind()
    yield
    del NODE_KINDS["stamp"]


def test_it_runs_draws_and_checks_a_kind_added_to_the_table(tmp_path: Path, stamp: None) -> None:
    root = write_pack(
        tmp_path / "p",
        nodes={"s": {"kind": "stamp", "writes": ["tag"], "value": "ok"}, "done": {"kind": "end"}},
        edges=[{"from": "s", "to": "done"}, {"on_fail": "done", "from": "s"}],
    )
    with pytest.raises(Exception, match="a stamp node cannot fail"):
        load_pack(root)
    (root / "graph.yaml").write_text(
        "nodes:\n  s: {kind: stamp, writes: [tag], value: ok}\n  done: {kind: end}\nedges:\n  - {from: s, to: done}\n"
    )
    pack = load_pack(root)
    result = run_pack(pack, {}, backend=NoModel())
    assert result.status == "done" and result.output == {"tag": "ok"}
    assert "  s{{s<br/><small>stamp</small>}}" in mermaid(pack)


def test_it_declares_a_drawing_for_every_kind() -> None:
    drawings = [kind.drawing for kind in NODE_KINDS.values()]
    assert all(d.shape in NODE_SHAPES for d in drawings)
    assert len({d.css_class for d in drawings}) == len(drawings)
    assert [d.label for d in drawings] == list(NODE_KINDS)


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("module", sorted(p.name for p in (RUNTIME / "nodes").glob("*.py")))
def test_it_keeps_kind_modules_below_the_walker_and_the_loader(module: str) -> None:
    imported = _imports(RUNTIME / "nodes" / module)
    assert not imported & {"runtime.walker", "runtime.pack", "runtime.pack.load", "runtime.pack.checks"}


def test_it_has_no_import_cycle_inside_the_runtime() -> None:
    """Every import counts, at module level, in a function or under TYPE_CHECKING."""
    modules = {}
    for path in RUNTIME.rglob("*.py"):
        parts = path.relative_to(RUNTIME.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {name: {m for m in _imports(path) if m in modules and m != name} for name, path in modules.items()}
    done: set[str] = set()

    def visit(name: str, stack: list[str]) -> list[str] | None:
        if name in stack:
            return [*stack[stack.index(name) :], name]
        if name in done:
            return None
        for nxt in sorted(graph[name]):
            cycle = visit(nxt, [*stack, name])
            if cycle:
                return cycle
        done.add(name)
        return None

    assert [c for name in sorted(graph) if (c := visit(name, []))] == []
