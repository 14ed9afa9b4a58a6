"""A plan document read back from an example pack's graph.yaml: the hand-built plan the
offline test model must pass (tests only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

_PLAN_KEYS = (
    "description",
    "reads",
    "writes",
    "two_stage",
    "samples",
    "agree",
    "confidence",
    "max_tokens",
    "tool",
    "args",
    "expr",
    "output",
)


def plan_from_pack(pack_dir: Path) -> dict[str, Any]:
    """The plan document of the pack at `pack_dir`: its nodes and edges, keys a plan
    cannot say (retry, temperature) dropped; fields written that the manifest does not
    output become `state` (any JSON value)."""
    graph = yaml.safe_load((pack_dir / "graph.yaml").read_text(encoding="utf-8"))
    manifest = yaml.safe_load((pack_dir / "manifest.yaml").read_text(encoding="utf-8"))
    nodes = []
    for node_id, body in graph["nodes"].items():
        node: dict[str, Any] = {"id": node_id, "kind": body["kind"]}
        node.update({k: body[k] for k in _PLAN_KEYS if k in body})
        if "assert" in body:
            node["assert"] = body["assert"]
        nodes.append(node)
    edges = [
        {k: v for k, v in e.items() if k in ("from", "to", "when", "on_fail", "on_unsure")} for e in graph["edges"]
    ]
    outputs = set(manifest.get("output") or [])
    for end in graph["nodes"].values():
        outputs |= set(end.get("output") or [])
    state: dict[str, Any] = {f: {} for n in nodes for f in n.get("writes", []) if f not in outputs}
    return {
        "name": manifest["name"],
        "summary": "the example pack",
        "entry": manifest["entry"],
        "state": state,
        "nodes": nodes,
        "edges": edges,
    }
