"""Generated chain packs shared by the benchmarks (stdlib + runtime only).

A chain of N generate nodes `n1 .. nN`: node i reads the previous value (`input.x` for
node 1, `v{i-1}` after that) and writes `v{i}`, whose correct value is
`v{i-1} + c_i` with a fixed per-node constant `c_i`. With `asserts=True` every node
carries `assert: "v{i} == v{i-1} + c_i"`, so any wrong number is caught before commit.
`fakes/scripted.json` holds the correct answers for the fixed input `{"x": X}`.

Optionally the chain ends in a `human` node (`confirm`, writes `ok`) before the end node,
so a run stops `waiting` there: the benchmarks use that as "killed just before the end"
for measuring replay on resume."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

X = 7  # the fixed run input: {"x": X}


def constant(i: int) -> int:
    """c_i: a fixed, varied per-node constant in 1..13."""
    return (i * 37 + 11) % 13 + 1


def correct_values(n: int, x: int = X) -> dict[str, int]:
    values: dict[str, int] = {}
    prev = x
    for i in range(1, n + 1):
        prev = prev + constant(i)
        values[f"v{i}"] = prev
    return values


def write_chain(
    root: Path,
    n: int,
    *,
    asserts: bool = True,
    retry: dict[str, Any] | None = None,
    human_tail: bool = False,
    x: int = X,
    name: str | None = None,
) -> dict[str, int]:
    """Write an n-node chain pack into `root` (created). Returns the correct output."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "prompts").mkdir(exist_ok=True)
    (root / "grammars").mkdir(exist_ok=True)
    (root / "fakes").mkdir(exist_ok=True)
    manifest: dict[str, Any] = {
        "name": name or f"chain{n}",
        "version": "1",
        "entry": "n1",
        "model": "fake:fakes/scripted.json",
        "inputs": ["x"],
        "max_steps": n + 10,
    }
    if retry is not None:
        manifest["retry"] = retry
    nodes: dict[str, Any] = {}
    edges: list[dict[str, str]] = []
    answers: dict[str, Any] = {}
    values = correct_values(n, x)
    for i in range(1, n + 1):
        nid, out = f"n{i}", f"v{i}"
        prev = "input.x" if i == 1 else f"v{i - 1}"
        node: dict[str, Any] = {"kind": "generate", "reads": [prev], "writes": [out]}
        if asserts:
            node["assert"] = f"{out} == {prev} + {constant(i)}"
        nodes[nid] = node
        (root / "prompts" / f"{nid}.txt").write_text(
            f"Add {constant(i)} to {{{{ {prev} }}}}. Reply with {out}.\n", encoding="utf-8"
        )
        (root / "grammars" / f"{nid}.json").write_text(
            json.dumps(
                {
                    "type": "object",
                    "properties": {out: {"type": "integer"}},
                    "required": [out],
                    "additionalProperties": False,
                }
            ),
            encoding="utf-8",
        )
        answers[nid] = {out: values[out]}
        if i > 1:
            edges.append({"from": f"n{i - 1}", "to": nid})
    last = f"n{n}"
    if human_tail:
        nodes["confirm"] = {"kind": "human", "reads": [f"v{n}"], "writes": ["ok"]}
        (root / "grammars" / "confirm.json").write_text(
            json.dumps(
                {
                    "type": "object",
                    "properties": {"ok": {"type": "boolean"}},
                    "required": ["ok"],
                    "additionalProperties": False,
                }
            ),
            encoding="utf-8",
        )
        edges.append({"from": last, "to": "confirm"})
        last = "confirm"
    nodes["done"] = {"kind": "end"}
    edges.append({"from": last, "to": "done"})
    # JSON is YAML: no quoting questions for the generated expressions.
    (root / "manifest.yaml").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    (root / "graph.yaml").write_text(json.dumps({"nodes": nodes, "edges": edges}, indent=1) + "\n", encoding="utf-8")
    (root / "fakes" / "scripted.json").write_text(json.dumps({"nodes": answers}, indent=1) + "\n", encoding="utf-8")
    return values
