"""The one-call plan: one generate node that reads every input and writes every output,
then an end. The verdict's yardstick (docs/compiler.md, "The verdict"): a pack is only
worth its extra steps when it beats this on the target. A spec with tools has no
one-call plan (one call cannot call a tool). Arms are compared on their outputs (every
expected field matches by its rule), since one call has none of the graph's ends."""

from __future__ import annotations

import json
from collections.abc import Mapping

from compiler.plan import Plan, parse_plan
from compiler.spec import Spec
from compiler.tools import ToolSpec

NODE = "answer"
END = "done"


def one_call_plan(spec: Spec, catalogue: Mapping[str, ToolSpec] | None = None) -> Plan | None:
    """The one-call plan for `spec`, or None when the spec names tools."""
    if spec.tools:
        return None
    fields = "\n".join(f"- {name}: {f.description.strip()}" for name, f in spec.outputs.items())
    document = {
        "name": spec.name,
        "summary": "One model call writes every output: the yardstick the planned pack must beat.",
        "entry": NODE,
        "nodes": [
            {
                "id": NODE,
                "kind": "generate",
                "description": "Every output in one call.",
                "reads": [f"input.{name}" for name in spec.inputs],
                "writes": list(spec.outputs),
                "instructions": f"{spec.task.strip()}\n\nFill in:\n{fields}",
            },
            {"id": END, "kind": "end", "output": list(spec.outputs)},
        ],
        "edges": [{"from": NODE, "to": END}],
    }
    return parse_plan(document, spec)


def outputs_only(spec: Spec) -> bytes:
    """The gold cases as the one-call pack's evalset: id, input, expected and tags only.
    The gold's `end` and `path` name the planned graph's nodes, which one call does not
    have; the spec's gold.jsonl itself is untouched (docs/invariants.md, 6)."""
    lines = []
    for case in spec.gold:
        line: dict[str, object] = {"id": case.id, "input": case.input, "expected": case.expected}
        if case.tags:
            line["tags"] = list(case.tags)
        lines.append(json.dumps(line, ensure_ascii=False) + "\n")
    return "".join(lines).encode("utf-8")


__all__ = ["one_call_plan", "outputs_only"]
