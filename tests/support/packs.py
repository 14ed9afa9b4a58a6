"""Small packs written in plain sight, for endpoint tests and benchmarks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from runtime.backends import ModelCall

RATING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "mood": {"enum": ["happy", "sad", "calm"]},
        "stars": {"type": "integer", "minimum": 1, "maximum": 3},
    },
    "required": ["mood", "stars"],
    "additionalProperties": False,
}


def write_chain_pack(
    root: Path,
    *,
    nodes: int = 1,
    schema: dict[str, Any] | None = None,
    model: str | None = None,
    node_options: dict[str, Any] | None = None,
    retry: dict[str, Any] | None = None,
) -> Path:
    """A pack of `nodes` generate nodes in a line (n1 -> n2 -> ... -> done), each writing
    its own copy of `schema`'s properties with a prefix (n1_mood, n1_stars, ...)."""
    schema = schema or RATING_SCHEMA
    root.mkdir(parents=True, exist_ok=True)
    (root / "prompts").mkdir(exist_ok=True)
    (root / "grammars").mkdir(exist_ok=True)
    graph_nodes: dict[str, Any] = {}
    edges: list[dict[str, Any]] = []
    for i in range(1, nodes + 1):
        node = f"n{i}"
        props = {f"{node}_{k}": v for k, v in schema["properties"].items()}
        node_schema = {**schema, "properties": props, "required": [f"{node}_{k}" for k in schema.get("required", [])]}
        reads = ["input.story"] if i == 1 else [f"n{i - 1}_{next(iter(schema['properties']))}"]
        graph_nodes[node] = {"kind": "generate", "reads": reads, "writes": sorted(props), **(node_options or {})}
        (root / "prompts" / f"{node}.txt").write_text(
            "Read the story and rate it as JSON.\n" + " ".join(f"{{{{ {r} }}}}" for r in reads) + "\n"
        )
        (root / "grammars" / f"{node}.json").write_text(json.dumps(node_schema, indent=2))
        edges.append({"from": node, "to": f"n{i + 1}" if i < nodes else "done"})
    graph_nodes["done"] = {"kind": "end"}
    manifest: dict[str, Any] = {"name": "chain", "version": "1", "entry": "n1", "inputs": ["story"]}
    if model:
        manifest["model"] = model
    if retry:
        manifest["retry"] = retry
    (root / "manifest.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    (root / "graph.yaml").write_text(yaml.safe_dump({"nodes": graph_nodes, "edges": edges}, sort_keys=False))
    return root


def rating_call(attempt: int = 1, schema: dict[str, Any] | None = RATING_SCHEMA, **kw: Any) -> ModelCall:
    """One model call of run `run7`, node `rate`, asking for RATING_SCHEMA (the fault
    server answers it with a minimal instance): the endpoint client tests' call."""
    return ModelCall(
        run_id="run7",
        node="rate",
        attempt=attempt,
        schema=schema,
        messages=[{"role": "user", "content": "Rate the story."}],
        **kw,
    )


# Schemas the GBNF converter must turn into grammars llama-server accepts and obeys
# (tests/endpoints/test_llama_server.py, test_prefill.py).
GBNF_SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 12},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 1, "maxItems": 3},
            "ok": {"type": "boolean"},
        },
        "required": ["name", "tags"],
    },
    {
        "type": "object",
        "properties": {
            "who": {
                "type": "object",
                "properties": {
                    "age": {"type": "integer", "minimum": 0},
                    "pet": {"type": ["string", "null"], "maxLength": 24},
                },
                "required": ["age", "pet"],
            },
            "score": {"type": "number"},
            "kind": {"const": "story"},
        },
        "required": ["who", "score", "kind"],
    },
    {
        "$defs": {
            "item": {
                "type": "object",
                "properties": {"n": {"type": "integer", "minimum": -2, "maximum": 2}},
                "required": ["n"],
            }
        },
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"$ref": "#/$defs/item"}, "maxItems": 2},
            "note": {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 5}]},
        },
        "required": ["items", "note"],
    },
]
