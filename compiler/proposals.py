"""Instruction proposals (GEPA style): the planner model rewrites one generate node's
instructions after seeing the validation cases the node got wrong.

One `propose` call is one request to the model planner's backend: the prompt holds the
task, the node (id, description, what it reads and writes, with the outputs' descriptions
and allowed values), its current instructions and up to `MAX_FAILURES` failing cases
(input, the node's output, the expected values). The answer is constrained by a JSON
schema grammar to a list of instruction texts. The texts are the instructions only: the
emitter adds the read sections and the reply line, so placeholders (`{{`, `}}`) are
broken up here as the emitter breaks them up.

The request is deterministic (temperature 0, failures in case-id order), so the same
failures give the same request. The planner backend is not behind the compiler's target
cache: a rebuild asks the planner again, and reproduces the proposal as far as the
planner model is deterministic at temperature 0. Used by the search's prompt coordinate
when a model planner is given (docs/compiler.md, "The search")."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from compiler.plan import PlanNode
from compiler.planners.model import ModelPlanner
from compiler.spec_types import FieldSpec, Spec
from runtime import Cancelled, ModelCall

SYSTEM = (
    "You improve the instructions of one step of a Packforge workflow. A small language model "
    "runs the step: it reads the step's inputs and answers one JSON object of the fields the "
    "step writes. Reply with JSON only."
)
MAX_FAILURES = 8  # failing cases shown to the planner, at most
MAX_TEXT = 2000  # characters one proposed instructions text may hold
_CASE_CHARS = 600  # one failing case, as shown
_SECTION_CHARS = 4000  # the task, the current instructions
_FAILURES_CHARS = MAX_FAILURES * (_CASE_CHARS + 1)  # the failures section


@dataclass(frozen=True)
class Failure:
    """One validation case a node got wrong: its id, its input, what the node wrote and
    what was expected (both restricted to the node's writes by the caller)."""

    case_id: str
    input: dict[str, Any]
    got: dict[str, Any]
    expected: dict[str, Any]


@dataclass(frozen=True)
class Proposals:
    """What one `propose` call gave: the new instruction texts (distinct, stripped,
    non-empty, at most `MAX_TEXT` characters, none equal to the current instructions;
    possibly none), and the tokens and dollars the call spent."""

    texts: tuple[str, ...] = ()
    tokens: int = 0
    cost_usd: float = 0.0


def schema(count: int) -> dict[str, Any]:
    """The answer's grammar: an object holding 1 to `count` instruction texts."""
    return {
        "type": "object",
        "properties": {
            "instructions": {
                "type": "array",
                "items": {"type": "string", "maxLength": MAX_TEXT},
                "minItems": 1,
                "maxItems": count,
            }
        },
        "required": ["instructions"],
        "additionalProperties": False,
    }


def propose(
    planner: ModelPlanner,
    spec: Spec,
    node: PlanNode,
    current: str,
    failures: Sequence[Failure],
    *,
    count: int = 2,
    cancel: threading.Event | None = None,
    spent_tokens: int = 0,
    spent_cost_usd: float = 0.0,
) -> Proposals:
    """Ask the planner for up to `count` rewritten instructions for `node`, shown its
    `current` instructions and `failures`. The failures must come from the validation
    split, never from test (the caller guarantees it: test cases are reported, never used
    for a choice). `spent_tokens` and `spent_cost_usd` are what the compile's planner has
    spent so far: when the spec's `planner_tokens` or `cost_usd` budget is already spent,
    no call is made and no texts come back. An answer cut off at the token limit, or not
    JSON of the grammar's shape, gives no texts. A backend error propagates (runtime's
    BackendError); a set `cancel` raises runtime's Cancelled."""
    if count < 1:
        raise ValueError("count must be at least 1")
    if cancel is not None and cancel.is_set():
        raise Cancelled("compile cancelled")
    if spent_tokens >= spec.budgets.planner_tokens or spent_cost_usd > spec.budgets.cost_usd:
        return Proposals()
    call = ModelCall(
        run_id=f"propose-{spec.name}-{node.id}",
        node="planner",
        attempt=1,
        messages=[
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": prompt(spec, node, current, failures, count)},
        ],
        schema=schema(count),
        max_tokens=planner.max_tokens,
        temperature=0.0,
        cancel=cancel,
    )
    reply = planner.backend().complete(call)
    tokens = reply.prompt_tokens + reply.completion_tokens
    texts = () if reply.finish_reason == "length" else texts_of(reply.text, current, count)
    return Proposals(texts=texts, tokens=tokens, cost_usd=reply.cost_usd)


def texts_of(answer: str, current: str, count: int) -> tuple[str, ...]:
    """The usable texts of an answer: placeholders broken up, stripped, non-empty, at most
    `MAX_TEXT` characters, distinct and unlike `current` (whitespace aside), at most
    `count`. An answer that is not the grammar's object gives none."""
    try:
        document: Any = json.loads(answer)
    except json.JSONDecodeError:
        return ()
    items = document.get("instructions") if isinstance(document, dict) else None
    if not isinstance(items, list):
        return ()
    seen = {_words(current)}
    texts: list[str] = []
    for item in items:
        if not isinstance(item, str):
            continue
        text = _unplaceholder(item).strip()
        if not text or len(text) > MAX_TEXT or _words(text) in seen:
            continue
        seen.add(_words(text))
        texts.append(text)
    return tuple(texts[:count])


def prompt(spec: Spec, node: PlanNode, current: str, failures: Sequence[Failure], count: int) -> str:
    """The planner's user message: the task, the node, the spec's rules, its current
    instructions, the failing cases (the first `MAX_FAILURES` by case id) and what to write."""
    shown = sorted(failures, key=lambda f: f.case_id)[:MAX_FAILURES]
    parts = [
        f"Task of the workflow '{spec.name}': " + _bounded(" ".join(spec.task.split())),
        f"The step '{node.id}'" + (f": {' '.join(node.description.split())}" if node.description else "."),
        "It reads:\n" + "\n".join(f"- {_read(r, spec)}" for r in node.reads) if node.reads else "It reads nothing.",
        "It writes:\n" + "\n".join(f"- {_write(w, spec)}" for w in node.writes),
        *(
            ["The workflow's rules:\n" + _bounded("\n".join(f"- {' '.join(r.text.split())}" for r in spec.rules))]
            if spec.rules
            else []
        ),
        "The step's current instructions:\n"
        + ('"""\n' + _bounded(current.strip()) + '\n"""' if current.strip() else "(none)"),
        f"The step got these validation cases wrong ({len(failures)}; {len(shown)} shown):\n"
        + _bounded("\n".join(_case(f) for f in shown), _FAILURES_CHARS),
        f"Write {count} different rewritten instruction text{'s' if count != 1 else ''} for this step that "
        "would make the small model get cases like these right. Keep them general: state the rule or the "
        "distinction the cases show, never a case's own values or answers as a special case. Each is the "
        "instructions only (the step's inputs and the reply format are added after them), plain text "
        f"without placeholders, at most {MAX_TEXT} characters. "
        'Reply {"instructions": [...]}.',
    ]
    return "\n\n".join(parts)


def _read(read: str, spec: Spec) -> str:
    """One read as the prompt shows it: its name and, when the spec has it, what it holds."""
    if read.startswith("input."):
        field = spec.inputs.get(read.removeprefix("input."))
        return f"{read}: {_about(field)}" if field else read
    field = spec.outputs.get(read)
    return f"{read} (written by an earlier step): {_about(field)}" if field else f"{read} (written by an earlier step)"


def _write(name: str, spec: Spec) -> str:
    """One write as the prompt shows it: its name, what it holds, its allowed values."""
    field = spec.outputs.get(name)
    return f"{name}: {_about(field)}" if field else f"{name} (a working field, not an output)"


def _about(field: FieldSpec) -> str:
    """What a field holds, in words: its description, type and allowed values."""
    text = " ".join(field.description.split())
    if field.type:
        text += f" ({field.type})"
    if field.values is not None:
        listed = ", ".join(_compact(v) for v in field.values)
        text += f"; {'each item is' if field.item_set else 'one of'}: {listed}"
    return text


def _case(failure: Failure) -> str:
    """One failing case in a few lines, at most `_CASE_CHARS` characters: the input is
    cut first, so what the step wrote and what was expected stay whole when they fit."""
    tail = f"\n  the step wrote: {_compact(failure.got)}\n  expected: {_compact(failure.expected)}"
    head = f"case {failure.case_id}\n  input: "
    shown = _compact(failure.input)
    room = max(_CASE_CHARS - len(head) - len(tail), 80)
    if len(shown) > room:
        shown = shown[: room - 6] + " [...]"
    text = head + shown + tail
    return text if len(text) <= _CASE_CHARS else text[: _CASE_CHARS - 6] + " [...]"


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _words(text: str) -> str:
    return " ".join(text.split())


def _unplaceholder(text: str) -> str:
    """`text` with no `{{` or `}}` left (each is broken up, as the emitter does)."""
    while "{{" in text or "}}" in text:
        text = text.replace("{{", "{ {").replace("}}", "} }")
    return text


def _bounded(text: str, limit: int = _SECTION_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + "\n[...]"
