"""A two-level classification pack with state-dependent choices, written in plain sight
(tests/runtime/test_prompting.py, tests/endpoints/test_prompting_llama.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

LABEL = {"type": "object", "properties": {"label": {"enum": ["animal", "plant"]}}, "required": ["label"]}
SUB = {"type": "object", "properties": {"sublabel": {"type": "string"}}, "required": ["sublabel"]}
SUBLABELS = {"animal": ["cat", "dog"], "plant": ["tree", "moss"]}


def write_hierarchy(
    root: Path,
    *,
    sub: dict[str, Any] | None = None,
    files: dict[str, str] | None = None,
    manifest: dict[str, Any] | None = None,
) -> Path:
    """top (label) -> sub (sublabel, chosen from labels/sublabels.yaml by label) -> done;
    sub's on_fail goes to `review`."""
    (root / "prompts").mkdir(parents=True)
    (root / "grammars").mkdir()
    (root / "labels").mkdir()
    nodes = {
        "top": {"kind": "generate", "reads": ["input.text"], "writes": ["label"]},
        "sub": {
            "kind": "generate",
            "reads": ["input.text", "label"],
            "writes": ["sublabel"],
            "choices": {"sublabel": {"labels": "sublabels", "key": "label"}},
            **(sub or {}),
        },
        "done": {"kind": "end"},
        "review": {"kind": "end"},
    }
    edges = [{"from": "top", "to": "sub"}, {"from": "sub", "to": "done"}, {"from": "sub", "on_fail": "review"}]
    (root / "manifest.yaml").write_text(
        yaml.safe_dump({"name": "h", "version": "1", "entry": "top", "inputs": ["text"], **(manifest or {})})
    )
    (root / "graph.yaml").write_text(yaml.safe_dump({"nodes": nodes, "edges": edges}, sort_keys=False))
    (root / "prompts" / "top.txt").write_text("Kind of thing: {{ input.text }}\n")
    (root / "prompts" / "sub.txt").write_text("It is a {{ label }}. Which one: {{ input.text }}\n")
    (root / "grammars" / "top.json").write_text(json.dumps(LABEL))
    (root / "grammars" / "sub.json").write_text(json.dumps(SUB))
    (root / "labels" / "sublabels.yaml").write_text(yaml.safe_dump(SUBLABELS))
    for rel, text in (files or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root
