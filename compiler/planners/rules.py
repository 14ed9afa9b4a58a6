"""The model-free planner: a sound plan from the spec, its induction, the gold cases and
the tool catalogue alone, deterministic (same inputs, same document). It is what `packforge
build --planner rules` uses offline, and the baseline a model plan must beat.
docs/compiler.md, "The planners", says in full what it infers and from what; in short:

1. **Nodes** from fields: tool-returned outputs belong to the tool's node; a closed-choice
   field (induced enum or const, boolean) starts a classification node, a run of other
   fields is an extraction node, fields present in exactly the same gold cases go together.
2. **Tools** in the spec's order, each after the node writing its last argument; a tool
   that acts on the world gates the decision feeding it (`samples: 3, agree: 2`,
   `on_unsure` -> the unsure end).
3. **Rules** with `expr` become the assert of the node writing their last field, or of an
   assert node gold names with a check word (`check_total`); a node gold takes right after a
   failed check and other paths skip becomes a two-stage re-read.
4. **Ends** from gold `end`s and the spec's `unsure_end` (a human node when gold carries
   human answers); `on_fail` where a check, a tool or a gold path asks for it.
5. **Routing** from gold: where each case leaves the chain, and one or two tests on fields
   written so far that tell the cases leaving for each end apart from the rest.
6. **Names** from the gold `path` entries (by shared word, then by position), so the
   example packs' scripted models, keyed by node id, can drive the regenerated packs.
7. **The choose_tool pattern** when a spec tool has an argument no spec field provides
   (packs/calculator: `a`, `b`, `value`): a choose_tool node over the spec's tools, then
   one generate node answering every output from the calls, then the ends.

What it cannot infer: checks over a tool's result (refund_desk's "never refund more than
is left"), rules given only in words, routes needing three tests, thresholds other than
the observed ones, enum values gold never shows, prompts better than the field
descriptions. It ignores feedback.

The parts live in compiler/planners/rules_base.py (fields, helpers), rules_tools.py (2, 7),
rules_names.py (6) and rules_routes.py (5); this module builds the document."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

from compiler.induce import Induction
from compiler.plan import all_of
from compiler.planners.rules_base import GATE_AGREE, GATE_SAMPLES, ChainNode, state_schema
from compiler.planners.rules_routes import Routing
from compiler.planners.rules_tools import Tools
from compiler.planners.shared import PlanRequest, PlanResult
from compiler.spec import Spec
from compiler.tools import ToolSpec
from runtime import Cancelled, compile_expr

__all__ = ["RulesPlanner", "rules_plan"]

SUMMARY = (
    "Made by the rules planner from the spec, the induced schemas and the gold cases: "
    "classification nodes for closed-choice fields, extraction nodes for the rest, "
    "tools in the spec's order, rules as asserts, routing inferred from the gold ends."
)
CHOOSE_LINE = "Call the tools the task needs, one call at a time; stop when the results answer it."
ANSWER_LINE = "Answer from the results of the tool calls made for it."
SUMMARY_CHOOSING = (
    "Made by the rules planner from the spec, the induced schemas and the gold cases: no spec field "
    "gives the tools' arguments, so the model picks the calls (a choose_tool loop over the spec's tools, "
    "bounded by the most calls a gold case makes), then one node answers the outputs from the calls' "
    "results; rules as asserts, routing inferred from the gold ends, a failing loop to the unsure end."
)


class RulesPlanner:
    """The model-free planner. `plan` ignores feedback: the same spec gets the same plan."""

    name = "rules"

    def plan(self, request: PlanRequest, cancel: threading.Event | None = None) -> PlanResult:
        if cancel is not None and cancel.is_set():
            raise Cancelled("compile cancelled")
        return PlanResult(document=rules_plan(request.spec, request.induction, request.catalogue))


def rules_plan(spec: Spec, induction: Induction, catalogue: Mapping[str, ToolSpec]) -> dict[str, Any]:
    """The rules planner's plan document for `spec` (see the module docstring)."""
    return _Builder(spec, induction, catalogue).build()


class _Builder(Tools, Routing):
    # -- 1. nodes ------------------------------------------------------------------------

    def groups(self) -> list[ChainNode]:
        tool_written = {f for t in self.tools.values() for f in t.result_fields}
        everyone = frozenset(c.id for c in self.cases)
        groups: list[ChainNode] = []
        seen: frozenset[str] | None = None
        for name in self.spec.outputs:
            if name in tool_written:
                continue
            present = self.presence(name)
            closed = self.closed(name)
            current = groups[-1] if groups else None
            together = current is not None and present == seen and present != everyone
            if current is not None and (together or (not closed and not current.closed and present == seen)):
                current.writes.append(name)
                continue
            groups.append(ChainNode(id="", kind="generate", writes=[name], closed=closed))
            seen = present
        return groups

    # -- 3. rules ------------------------------------------------------------------------

    def place_rules(self, chain: list[ChainNode]) -> list[ChainNode]:
        out = list(chain)
        for rule in self.spec.rules:
            if rule.expr is None:
                continue
            refs = {r.split(".", 1)[0] for r in compile_expr(rule.expr).references if not r.startswith("input.")}
            writers = [i for i, n in enumerate(out) if set(n.writes) & refs]
            if not writers:
                continue
            last = writers[-1]
            node = out[last]
            if node.kind == "generate":
                # It writes the last field the rule reads and reads the others.
                node.asserts.append(rule.expr)
                node.rules.append(rule.text)
            else:
                out.insert(
                    last + 1, ChainNode(id="", kind="assert", expr=" ".join(rule.expr.split()), rules=[rule.text])
                )
        return out

    # -- the document --------------------------------------------------------------------

    def build(self) -> dict[str, Any]:
        ends: set[str] = {c.end for c in self.spec.gold if c.end and c.end != self.unsure}
        choosing = self.choosing()
        if choosing:
            chain = self.place_rules(self.choice_chain(ends))
        else:
            chain = self.name(self.place_rules(self.place_tools(self.groups())), ends)
        detours = [n for n in chain if n.detour is not None]
        chain = [n for n in chain if n.detour is None]
        self.gate(chain)
        routes = self.routes(chain)
        human = bool(self.human_answers)
        nodes: list[dict[str, Any]] = []
        edges: list[dict[str, Any]] = []
        state: dict[str, Any] = {}
        inputs = [f"input.{k}" for k in self.spec.inputs]
        written: list[str] = []
        gated_at: int | None = None
        for i, n in enumerate(chain):
            reads = inputs + [f for f in written if f not in n.writes]
            doc = self.node_doc(n, reads)
            if n.kind == "choose_tool":
                doc["to"] = routes[i][0][0]
            if n.gated and gated_at is None:
                gated_at = i
            nodes.append(doc)
            written += [w for w in n.writes if w not in written]
            for target, when in routes[i]:
                edges.append({"from": n.id, "to": target, **({"when": when} if when else {})})
            fail = n.on_fail
            checks = n.asserts or (n.kind == "assert" and n.expr != "true")
            if fail is None and self.unsure and (checks or n.gated or n.kind in ("tool", "choose_tool")):
                fail = self.unsure
            if fail:
                edges.append({"from": n.id, "on_fail": fail})
            if n.gated and self.unsure:
                edges.append({"from": n.id, "on_unsure": self.unsure})
        for n in detours:
            assert n.detour is not None
            nodes.append(self.node_doc(n, inputs + written))
            edges.append({"from": n.id, "to": n.detour[1]})
            if self.unsure and n.expr != "true":
                edges.append({"from": n.id, "on_fail": self.unsure})
        if self.unsure:
            if human:
                keys = list(dict.fromkeys(k for answer in self.human_answers for k in answer))
                stop = gated_at if gated_at is not None else len(chain) - 1
                # (not a tool loop's calls: its on_fail carries none of them)
                before = [f for n in chain[:stop] if n.kind != "choose_tool" for f in n.writes]
                nodes.append(
                    {
                        "id": self.unsure,
                        "kind": "human",
                        "description": "A person decides what the model could not.",
                        "reads": inputs + [f for f in dict.fromkeys(before) if f not in keys],
                        "writes": keys,
                        "instructions": "Decide this case: " + "; ".join(self.field_line(k) for k in keys),
                    }
                )
                for k in keys:
                    if k not in self.spec.outputs:
                        state[k] = state_schema([a.get(k) for a in self.human_answers])
                for target, when in routes[stop]:
                    edges.append({"from": self.unsure, "to": target, **({"when": when} if when else {})})
            elif any(self.unsure in (e.get("to"), e.get("on_fail"), e.get("on_unsure")) for e in edges):
                # an end nothing leads to would be unreachable (the loader refuses it)
                nodes.append(
                    {
                        "id": self.unsure,
                        "kind": "end",
                        "description": "The model could not decide; a person takes over.",
                    }
                )
        for end in sorted(ends, key=lambda e: [c.end for c in self.spec.gold].index(e)):
            nodes.append({"id": end, "kind": "end", "description": self.end_description(end)})
        referenced = {e.get("to") for e in edges} | {e.get("on_fail") for e in edges}
        for target in sorted(t for t in referenced if t and t not in {n["id"] for n in nodes}):
            nodes.append({"id": target, "kind": "end"})
        doc = {
            "name": self.spec.name,
            "summary": SUMMARY_CHOOSING if choosing else SUMMARY,
            "entry": chain[0].id if chain else self.unsure or "done",
            "nodes": nodes,
            "edges": edges,
        }
        if state:
            doc["state"] = state
        return doc

    def node_doc(self, n: ChainNode, reads: list[str]) -> dict[str, Any]:
        """The plan document's entry for one node."""
        if n.kind == "generate":
            doc: dict[str, Any] = {
                "id": n.id,
                "kind": "generate",
                "description": self.describe(n),
                "reads": reads,
                "writes": list(n.writes),
                "instructions": self.instructions(n),
            }
            if n.two_stage:
                doc["two_stage"] = True
            if n.gated:
                doc["samples"] = GATE_SAMPLES
                doc["agree"] = GATE_AGREE
            if n.asserts:
                doc["assert"] = all_of(n.asserts)
            if any(
                set(self.induction.fields[f].types) & {"array", "object"}
                for f in n.writes
                if f in self.induction.fields
            ):
                doc["max_tokens"] = 768
            return doc
        if n.kind == "choose_tool":
            doc = {
                "id": n.id,
                "kind": "choose_tool",
                "description": "Call the tools the task needs, one at a time, then stop.",
                "reads": reads,
                "writes": list(n.writes),
                "instructions": self.instructions(n),
                "tools": list(n.tools),
                "max_calls": n.max_calls,
            }
            if n.min_calls:
                doc["min_calls"] = n.min_calls
            return doc
        if n.kind == "tool":
            tool = self.tools[n.tool or ""]
            return {
                "id": n.id,
                "kind": "tool",
                "description": tool.description or f"Call {n.tool}.",
                "tool": n.tool,
                "args": dict(n.args),
                "reads": list(dict.fromkeys(n.args.values())),
                "writes": list(n.writes),
            }
        refs = sorted(compile_expr(n.expr or "true").references)
        return {
            "id": n.id,
            "kind": "assert",
            "description": " ".join(" ".join(r.split()) for r in n.rules)
            or "Named by the gold paths; the rules planner found no check to put here.",
            "reads": list(dict.fromkeys(r if r.startswith("input.") else r.split(".", 1)[0] for r in refs)),
            "expr": n.expr or "true",
        }

    def describe(self, n: ChainNode) -> str:
        if n.answers:
            return f"Give {', '.join(n.writes)} from the tool calls' results."
        what = "Decide" if n.closed else "Extract"
        return f"{what} {', '.join(n.writes)}."

    def instructions(self, n: ChainNode) -> str:
        if n.kind == "choose_tool":
            lines = [self.spec.task.strip(), "", CHOOSE_LINE]
            if n.rules:
                lines += ["", "Rules:"] + [f"- {' '.join(r.split())}" for r in n.rules]
            return "\n".join(lines)
        lines = [self.spec.task.strip(), "", *([ANSWER_LINE, ""] if n.answers else []), "Fill in:"]
        for name in n.writes:
            line = f"- {self.field_line(name)}"
            vals = self.values(name)
            if vals and self.closed(name):
                line += f" (one of: {', '.join(json.dumps(v) for v in vals)})"
            copied = self.induction.copied.get(name)
            if copied:
                line += f" Copy it exactly as written in {copied}."
            lines.append(line)
        if n.rules:
            lines += ["", "Rules:"] + [f"- {' '.join(r.split())}" for r in n.rules]
        return "\n".join(lines)

    def end_description(self, end: str) -> str:
        n = sum(1 for c in self.spec.gold if c.end == end)
        return f"Where {n} gold case{'s' if n != 1 else ''} end."
