"""A pack as an MCP tool, as plain data: its name, description, input and result
schemas, and the result of one run in the shape an MCP client receives. Shared by
`packforge mcp` (runtime/mcp_server.py, stdio) and the studio's MCP endpoint
(studio/deployments/mcp.py, streamable HTTP); this module imports no MCP SDK, so the
runtime loads without it (docs/tools.md, "MCP")."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from runtime.pack.model import Pack

__all__ = ["RUN_RESULT_SCHEMA", "McpTool", "pack_input_schema", "pack_tool", "payload_text", "run_payload", "tool_name"]

# What a pack's tool call returns as structured content (and, as JSON, as its text).
RUN_RESULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "run_id": {"type": "string", "description": "the run's id: its checkpoint and trace"},
        "status": {"enum": ["done", "failed", "waiting", "cancelled", "queued", "running"]},
        "output": {"type": ["object", "null"], "description": "the pack's output (status done)"},
        "tier": {"type": "string", "description": "the model tier that settled the run ('person' for a human)"},
        "waiting_at": {"type": "string", "description": "the node a waiting run waits at"},
        "review_item": {"type": ["integer", "null"], "description": "the studio review item of a waiting run"},
        "error": {"type": "string"},
    },
    "required": ["run_id", "status", "output", "tier"],
}

_TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_JSON_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
)


@dataclass(frozen=True)
class McpTool:
    """One MCP tool: `input_schema` and `output_schema` are JSON schemas of objects."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]


def tool_name(name: str) -> str:
    """`name` as an MCP tool name (letters, digits, _ . -; at most 128): other
    characters become '_'."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:128] or "pack"
    assert _TOOL_NAME.fullmatch(cleaned)
    return cleaned


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    for kind, name in _JSON_TYPES:
        if isinstance(value, kind):
            return name
    return "string"


def pack_input_schema(pack: Pack) -> dict[str, Any]:
    """The JSON schema of the pack's run input, as far as the pack says it: an object
    whose properties are the manifest's `inputs` (else the fields of its evalset
    inputs), each typed by the values the evalset gives it when they agree (integer
    widens to number), required when the manifest declares it or every evalset case
    gives it. A pack declares no input types, so this is a description for callers,
    not a contract: the run itself checks what its nodes read."""
    cases = [c.input for c in pack.cases]
    names = list(pack.inputs) if pack.inputs is not None else sorted({k for c in cases for k in c})
    properties: dict[str, Any] = {}
    for name in names:
        seen = {_json_type(c[name]) for c in cases if name in c}
        if seen == {"integer", "number"}:
            seen = {"number"}
        prop: dict[str, Any] = {}
        if len(seen) == 1:
            prop["type"] = seen.pop()
        elif len(seen) == 2 and "null" in seen:
            prop["type"] = sorted(seen)
        examples = [c[name] for c in cases if name in c and isinstance(c[name], (str, int, float, bool))]
        if examples:
            prop["examples"] = examples[:1]
        properties[name] = prop
    required = (
        list(pack.inputs) if pack.inputs is not None else [n for n in names if cases and all(n in c for c in cases)]
    )
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _readme_paragraph(pack: Pack) -> str:
    path = pack.root / "README.md"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""
    for block in text.split("\n\n"):
        block = block.strip()
        if block and not block.startswith(("#", "```", "|", "!")):
            return " ".join(block.split())
    return ""


def pack_tool(pack: Pack, name: str | None = None) -> McpTool:
    """The MCP tool that runs `pack`: named after it (or `name`), described by the
    manifest's `description` (else the first paragraph of its README.md), its input
    schema pack_input_schema, its result RUN_RESULT_SCHEMA."""
    description = " ".join(pack.description.split()) or _readme_paragraph(pack) or f"Run the pack {pack.name}."
    outputs = f" Output fields: {', '.join(pack.output)}." if pack.output else ""
    return McpTool(
        name=tool_name(name or pack.name),
        description=f"{description}{outputs} Returns run_id, status, output and tier.",
        input_schema=pack_input_schema(pack),
        output_schema=RUN_RESULT_SCHEMA,
    )


def run_payload(
    *,
    run_id: str,
    status: str,
    output: dict[str, Any] | None,
    tier: str,
    waiting_at: str | None = None,
    review_item: int | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    """A run's result as an MCP tool result's structured content (RUN_RESULT_SCHEMA):
    the output only when it is done; where a waiting run waits, and its review item."""
    payload: dict[str, Any] = {
        "run_id": run_id,
        "status": status,
        "output": output if status == "done" else None,
        "tier": tier,
    }
    if waiting_at:
        payload["waiting_at"] = waiting_at
    if review_item is not None:
        payload["review_item"] = review_item
    if error:
        payload["error"] = error
    return payload


def payload_text(payload: dict[str, Any]) -> str:
    """The structured content as the tool result's text block (for clients that read text)."""
    return json.dumps(payload, sort_keys=True, ensure_ascii=False)
