"""Packs for runtime tests, built in plain sight from small dicts."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from runtime.backends.base import ModelCall, ModelReply
from runtime.checkpoint import SQLiteStore

ENUM_SCHEMA = {
    "type": "object",
    "properties": {"category": {"enum": ["billing", "technical", "other"]}},
    "required": ["category"],
    "additionalProperties": False,
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


@pytest.fixture
def triage(tmp_path: Path) -> Path:
    """classify -> (billing) refund_check -> done | (else) done."""
    return write_pack(
        tmp_path / "triage",
        nodes={
            "classify": {"kind": "generate", "reads": ["input.ticket"], "writes": ["category"]},
            "priority": {
                "kind": "generate",
                "reads": ["category"],
                "writes": ["priority"],
                "assert": "priority in ['p1', 'p2']",
            },
            "done": {"kind": "end"},
            "other": {"kind": "end"},
        },
        edges=[
            {"from": "classify", "to": "priority", "when": "category == 'billing'"},
            {"from": "classify", "to": "other"},
            {"from": "priority", "to": "done"},
        ],
        grammars={"classify": ENUM_SCHEMA},
        script={"nodes": {"classify": {"category": "billing"}, "priority": {"priority": "p1"}}},
        cases=[
            {
                "id": "b",
                "input": {"ticket": "charged twice"},
                "expected": {"category": "billing", "priority": "p1"},
                "end": "done",
            },
        ],
    )


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Callable[..., SQLiteStore]]:
    """Make SQLite checkpoint stores that are closed when the test ends."""
    made: list[SQLiteStore] = []

    def make(name: str = "runs.sqlite", **kw: Any) -> SQLiteStore:
        store = SQLiteStore(tmp_path / name, **kw)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()
