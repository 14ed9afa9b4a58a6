"""The rules planner's tools (docs/compiler.md, "The rules planner", 2 and 7): tool nodes
placed after the node writing their last argument, the agreement gate on the decision a
tool that acts on the world hangs on, and the choose_tool pattern for tools whose
arguments no spec field provides (the model picks the calls, then answers from them)."""

from __future__ import annotations

from compiler.gold_tools import gold_tools
from compiler.planners.rules_base import READ_ONLY_VERBS, ChainNode, json_type_matches, similar
from compiler.planners.rules_names import Naming
from compiler.tools import ToolSpec

CALLS = "calls"  # the field a choose_tool node writes: the calls it made, with their results
PICK = "pick"  # the choose_tool node's id when gold paths name none
ANSWER = "answer"  # its final-answer node's id when gold paths name none
MAX_CALLS = 20  # the runtime's bound on max_calls
DEFAULT_MAX_CALLS = 3  # the runtime's default, when no gold case lists its tools


class Tools(Naming):
    """Places the spec's tools (a part of the rules planner's builder)."""

    def place_tools(self, groups: list[ChainNode]) -> list[ChainNode]:
        chain: list[ChainNode] = list(groups)
        outputs = list(self.spec.outputs)
        for tool in self.tools.values():
            written: list[str] = [f for n in chain if n.kind != "tool" for f in n.writes]
            args = {arg: self.arg_source(tool, arg, outputs) for arg in tool.arg_names}
            mapped = {a: s for a, s in args.items() if s is not None}
            node = ChainNode(id="", kind="tool", tool=tool.name, args=mapped, writes=list(tool.result_fields))
            # Right after the node that writes the last argument (else at the end).
            after = -1
            for i, n in enumerate(chain):
                if any(s in n.writes for s in mapped.values()):
                    after = i
            if not mapped or any(s not in written and not s.startswith("input.") for s in mapped.values()):
                after = len(chain) - 1
            chain.insert(after + 1, node)
        return chain

    def arg_source(self, tool: ToolSpec, arg: str, outputs: list[str]) -> str | None:
        if arg in outputs:
            return arg
        if arg in self.spec.inputs:
            return f"input.{arg}"
        words = set(arg.lower().split("_"))
        declared = tool.args.get("properties", {}).get(arg, {})
        wanted = declared.get("type") if isinstance(declared, dict) else None
        best: tuple[int, int, str] | None = None
        for i, name in enumerate(outputs):
            shared = len(words & set(name.lower().split("_")))
            if not shared:
                continue
            f = self.induction.fields.get(name)
            typed = 1 if wanted and f is not None and json_type_matches(wanted, f.types) else 0
            key = (shared + typed, -i, name)
            if best is None or key > best:
                best = key
        return best[2] if best else None

    def gate(self, chain: list[ChainNode]) -> None:
        if not self.unsure:
            return
        for t in chain:
            if t.kind != "tool" or not t.tool or t.tool.split("_")[0].lower() in READ_ONLY_VERBS:
                continue
            # The last decision before the tool that feeds it (a closed-choice field
            # beside an argument): what the side effect hangs on.
            feeding = [
                n
                for n in chain[: chain.index(t)]
                if n.kind == "generate"
                and set(n.writes) & set(t.args.values())
                and any(self.closed(f) for f in n.writes)
            ]
            if feeding:
                feeding[-1].gated = True
        # A node that gold paths show handing a case to the unsure end.
        ids = [n.id for n in chain]
        for c in self.spec.gold:
            if c.path and c.end == self.unsure and c.path[-1] == self.unsure:
                known = [p for p in c.path[:-1] if p in ids]
                if known:
                    node = chain[ids.index(known[-1])]
                    # A classification is drawn three times (a split vote goes to a
                    # person); an extraction that fails its checks takes on_fail.
                    if node.kind == "generate" and node.closed:
                        node.gated = True
                    elif node.kind == "generate":
                        node.on_fail = self.unsure

    # -- the choose_tool pattern ---------------------------------------------------------

    def placeable(self, tool: ToolSpec) -> bool:
        """Whether a fixed tool node can call `tool`: a spec field provides each of its
        required arguments (every argument when the schema names none required)."""
        required = tool.args.get("required")
        names = [a for a in required if isinstance(a, str)] if isinstance(required, list) else tool.arg_names
        outputs = list(self.spec.outputs)
        return all(self.arg_source(tool, a, outputs) is not None for a in names)

    def choosing(self) -> bool:
        """The choose_tool pattern applies: the spec has a tool no fixed node can call."""
        return any(not self.placeable(t) for t in self.tools.values())

    def choice_chain(self, ends: set[str]) -> list[ChainNode]:
        """A choose_tool node over every spec tool, then one generate node writing every
        output from the calls, then (when gold paths name more) pass-through checks. Ids
        from the gold paths: the entry sharing a word with an output names the answer
        node, the one before it (else the first) the choose_tool node; else `pick` and
        `answer`."""
        slots = self.slots(ends)
        outputs = list(self.spec.outputs)
        answer_slot = next((s for s in slots if any(similar(s, f) for f in outputs)), None)
        before = slots[: slots.index(answer_slot)] if answer_slot is not None else slots[:1]
        pick_slot = before[-1] if before else None
        if answer_slot is None and len(slots) > 1:
            answer_slot = slots[1]
        used = set(ends) | ({self.unsure} if self.unsure else set()) | set(slots)
        pick_id = pick_slot or self.fresh(PICK, used)
        used.add(pick_id)
        answer_id = answer_slot or self.fresh(ANSWER, used)
        taken = set(self.spec.inputs) | set(outputs)
        calls = self.fresh(CALLS, taken) if CALLS in taken else CALLS
        listed = [t for t in gold_tools(self.spec).values() if t is not None]
        most = max((len(t) for t in listed), default=0)
        pick = ChainNode(
            id=pick_id,
            kind="choose_tool",
            writes=[calls],
            tools=list(self.tools),
            max_calls=min(MAX_CALLS, most) if most else DEFAULT_MAX_CALLS,
            min_calls=1 if listed and all(listed) else 0,
            rules=[r.text for r in self.spec.rules],
        )
        answer = ChainNode(id=answer_id, kind="generate", writes=outputs, answers=True, on_fail=self.unsure)
        rest = [s for s in slots if s not in (pick_id, answer_id)]
        return [pick, answer, *(ChainNode(id=s, kind="assert", expr="true") for s in rest)]
