"""Packs for runtime tests, built in plain sight from small dicts, and what runs them:
the CLI as a subprocess (`pf`), a recording backend, host tools that log their calls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from runtime import load_pack
from runtime.backends.base import ModelCall, ModelReply
from runtime.errors import PackInvalid

REPO = Path(__file__).resolve().parents[2]

ENUM_SCHEMA = {
    "type": "object",
    "properties": {"category": {"enum": ["billing", "technical", "other"]}},
    "required": ["category"],
    "additionalProperties": False,
}


# A tool node that looks an order's total up: the first node of the tool packs here and
# in tests/support/tool_kill.py.
LOOKUP_NODE: dict[str, Any] = {
    "kind": "tool",
    "tool": "lookup",
    "reads": ["input.order"],
    "args": {"order_id": "input.order"},
    "writes": ["total"],
}


def write_pack(
    root: Path,
    *,
    nodes: dict[str, Any],
    edges: list[dict[str, Any]],
    entry: str | None = None,
    manifest: dict[str, Any] | None = None,
    prompts: dict[str, str] | None = None,
    grammars: dict[str, Any] | None = None,
    cases: list[dict[str, Any]] | None = None,
    script: dict[str, Any] | None = None,
) -> Path:
    """Write a pack. Generate nodes without an explicit prompt/grammar get defaults."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "prompts").mkdir(exist_ok=True)
    (root / "grammars").mkdir(exist_ok=True)
    body = {"name": "t", "version": 1, "entry": entry or next(iter(nodes)), **(manifest or {})}
    if script is not None:
        (root / "fakes").mkdir(exist_ok=True)
        (root / "fakes" / "scripted.json").write_text(json.dumps(script))
        body.setdefault("model", "fake:fakes/scripted.json")
    (root / "manifest.yaml").write_text(yaml.safe_dump(body, sort_keys=False))
    (root / "graph.yaml").write_text(yaml.safe_dump({"nodes": nodes, "edges": edges}, sort_keys=False))
    prompts, grammars = dict(prompts or {}), dict(grammars or {})
    for node_id, spec in nodes.items():
        if spec.get("kind") == "generate":
            reads = spec.get("reads", [])
            prompts.setdefault(node_id, f"Answer for {node_id}: " + " ".join(f"{{{{ {r} }}}}" for r in reads))
            grammars.setdefault(
                node_id,
                {
                    "type": "object",
                    "required": spec.get("writes", []),
                    "properties": {w: {} for w in spec.get("writes", [])},
                },
            )
    for node_id, text in prompts.items():
        (root / "prompts" / f"{node_id}.txt").write_text(text)
    for node_id, schema in grammars.items():
        (root / "grammars" / f"{node_id}.json").write_text(schema if isinstance(schema, str) else json.dumps(schema))
    if cases is not None:
        (root / "evalset.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    return root


class Recorder:
    """Wraps a backend and keeps every call it was asked to make."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.spec = inner.spec
        self.calls: list[ModelCall] = []

    def complete(self, call: ModelCall) -> ModelReply:
        self.calls.append(call)
        reply: ModelReply = self.inner.complete(call)
        return reply

    def close(self) -> None:
        pass

    def count(self, node: str) -> int:
        return sum(1 for c in self.calls if c.node == node)


def pf(*args: str, cwd: Path = REPO, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runtime", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=60,
    )


class Tools:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def registry(self) -> dict[str, Any]:
        def lookup(order_id: str) -> dict[str, Any]:
            self.calls.append(("lookup", {"order_id": order_id}))
            return {"total": 40.0}

        def refund(order_id: str, amount: float) -> dict[str, Any]:
            self.calls.append(("refund", {"order_id": order_id, "amount": amount}))
            return {"refund_id": f"R-{order_id}"}

        return {"lookup": lookup, "refund": refund}


def tool_pack(tmp_path: Path) -> Path:
    return write_pack(
        tmp_path / "p",
        manifest={"tools": ["lookup", "refund"]},
        nodes={
            "lookup": LOOKUP_NODE,
            "refund": {
                "kind": "tool",
                "tool": "refund",
                "reads": ["input.order", "total"],
                "args": {"order_id": "input.order", "amount": "total"},
                "writes": ["refund_id"],
            },
            "confirm": {"kind": "generate", "reads": ["refund_id"], "writes": ["message"]},
            "done": {"kind": "end"},
        },
        edges=[
            {"from": "lookup", "to": "refund"},
            {"from": "refund", "to": "confirm"},
            {"from": "confirm", "to": "done"},
        ],
        grammars={
            "refund": {"type": "object", "required": ["refund_id"], "properties": {"refund_id": {"type": "string"}}}
        },
        script={"nodes": {"confirm": {"message": "done"}}},
    )


class Killed(Exception):
    """Raised where the test kills the run (the process dies here)."""


GEN = {"kind": "generate", "reads": ["input.ticket"], "writes": ["category"]}  # a one-field classifier node


def backend_for(root: Path) -> Recorder:
    """The pack's own (scripted) model, every call kept."""
    from runtime import load_pack, open_backend

    pack = load_pack(root)
    assert pack.model is not None
    return Recorder(open_backend(pack.model, base_dir=pack.root))


def issues_of(root: Path, **kw: Any) -> list[str]:
    """The problems `load_pack(root, **kw)` refuses the pack for, as their one-line text
    ("file:line: message"); fails the test when the pack loads."""
    with pytest.raises(PackInvalid) as caught:
        load_pack(root, **kw)
    return [str(i) for i in caught.value.issues]
