"""The one-call plan: one generate node that reads every input and writes every output,
checked against the spec's expression rules (an answer that breaks one goes to the
spec's unsure end), then an end. The verdict's yardstick (docs/compiler.md, "The
verdict"): a pack is only worth its extra steps when it beats this on the target. A spec with tools has no
one-call plan (one call cannot call a tool). Arms are compared on their outputs (every
expected field matches by its rule), since one call has none of the graph's ends."""

from __future__ import annotations

import json
from collections.abc import Mapping

from compiler.plan import Plan, all_of, parse_plan
from compiler.spec import Spec
from compiler.spec_gold import bears_out
from compiler.tools import ToolSpec
from runtime import compile_expr

NODE = "answer"
END = "done"


def one_call_plan(spec: Spec, catalogue: Mapping[str, ToolSpec] | None = None) -> Plan | None:
    """The one-call plan for `spec`, or None when the spec names tools."""
    if spec.tools:
        return None
    fields = "\n".join(f"- {name}: {f.description.strip()}" for name, f in spec.outputs.items())
    node: dict[str, object] = {
        "id": NODE,
        "kind": "generate",
        "description": "Every output in one call.",
        "reads": [f"input.{name}" for name in spec.inputs],
        "writes": list(spec.outputs),
        "instructions": f"{spec.task.strip()}\n\nFill in:\n{fields}",
    }
    nodes: list[dict[str, object]] = [node, {"id": END, "kind": "end", "output": list(spec.outputs)}]
    edges: list[dict[str, object]] = [{"from": NODE, "to": END}]
    check = rules_check(spec)
    if check is not None:
        node["assert"] = check
        # An answer that breaks a rule goes where an unsure one goes; with no unsure end
        # the run fails, as the planned pack's does (compiler.planners.rules).
        if spec.unsure_end == END:
            edges.append({"from": NODE, "on_fail": END})
        elif spec.unsure_end and spec.unsure_end != NODE:
            nodes.append({"id": spec.unsure_end, "kind": "end", "description": "A person takes over."})
            edges.append({"from": NODE, "on_fail": spec.unsure_end})
    document = {
        "name": spec.name,
        "summary": "One model call writes every output: the yardstick the planned pack must beat.",
        "entry": NODE,
        "nodes": nodes,
        "edges": edges,
    }
    return parse_plan(document, spec)


def rules_check(spec: Spec) -> str | None:
    """The spec's expression rules that every gold case bears out, as one check on the
    answer (None when there are none). The one node writes every output, so a rule is
    checked on fields gold may leave unscored; a rule is kept only when every gold case,
    those at the unsure end included, sets every output it reads and satisfies it. Then
    the check holds back only answers no gold case expects, as the planned pack's
    asserts do: one call is verified as the pack is, and only the graph's extra steps
    are on trial. A held answer commits nothing, so every field of it scores a miss."""
    kept = [
        rule.expr
        for rule in spec.rules
        if rule.expr is not None and all(bears_out(compile_expr(rule.expr), case) for case in spec.gold)
    ]
    return all_of(kept)


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


__all__ = ["one_call_plan", "outputs_only", "rules_check"]
