"""The messages a generate node sends: system prompt, few-shot examples, the request.

- system: the node's `system:` template, else the pack's `system:`, else the built-in
  SYSTEM line; templates are rendered like node prompts (from the node's reads);
- few-shot (`examples:`): per chosen example, a user message (the node's prompt
  rendered with state = the example's expected values and input = its input) and an
  assistant message (the compact JSON of its expected values for the node's writes, and
  for the writes of the nodes that continue its conversation: `answer_fields`);
- the request: the node's prompt rendered on the run's state.

A node with `continues: NODE` goes on from NODE's conversation instead: NODE's messages
(built as above, on the current state), NODE's answer as an assistant message (the
compact JSON of NODE's writes, as committed), then this node's request. Every message
before the request is then what the server saw in NODE's call and has in its prompt
cache, so it reads only the answer and the new request (docs/pack-format.md,
"continues: a conversation that goes on"). When NODE's writes are not all in the state
(the walk came another way), the node's call is system prompt and request alone.

The manifest's `truncate:` cuts input fields before any of these is rendered (the
run's input itself is unchanged); what was cut is returned as notes for the trace, as is
a call shown fewer examples than `count` because too few match (`examples.match`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from runtime.fewshot import choose
from runtime.templates import lookup

if TYPE_CHECKING:
    from runtime.fewshot import Examples
    from runtime.pack.model import Node, Pack, Truncation

SYSTEM = "You fill in one JSON object that follows the given schema. Reply with the JSON object only."


@dataclass
class Built:
    messages: list[dict[str, str]]
    prompt: str  # the rendered request, for the trace
    notes: list[str]


def compact(answer: Mapping[str, Any]) -> str:
    """An answer as an assistant message shows it: compact JSON, as the grammar has the
    model write it."""
    return json.dumps(answer, ensure_ascii=False, separators=(",", ":"))


def cut(text: str, rule: Truncation) -> str:
    """`text` cut to `rule.max_chars` characters, keeping its head, tail or both ends."""
    n = rule.max_chars
    if len(text) <= n:
        return text
    if rule.keep == "tail":
        return text[len(text) - n :]
    if rule.keep == "middle":  # keep both ends, drop the middle
        back = n // 2
        return text[: n - back] + (text[len(text) - back :] if back else "")
    return text[:n]


def truncate_input(input_: Mapping[str, Any], rules: Mapping[str, Truncation]) -> tuple[dict[str, Any], list[str]]:
    """A copy of `input_` with each string field longer than its rule cut, and a note per cut."""
    shown = dict(input_)
    notes: list[str] = []
    for name, rule in rules.items():
        value = shown.get(name)
        if isinstance(value, str) and len(value) > rule.max_chars:
            shown[name] = cut(value, rule)
            notes.append(f"input.{name} cut from {len(value)} to {rule.max_chars} chars (keep {rule.keep})")
    return shown, notes


def answer_fields(pack: Pack, node: Node) -> tuple[str, ...]:
    """The fields a node's few-shot answers show: its writes, then the writes of every
    node that continues its conversation (and of theirs), so the examples that
    conversation carries show every answer given in it."""
    shown = list(node.writes)
    for other in pack.nodes.values():
        if other.continues == node.id:
            shown += [w for w in answer_fields(pack, other) if w not in shown]
    return tuple(shown)


def build_messages(pack: Pack, node: Node, state: Mapping[str, Any], input_: Mapping[str, Any]) -> Built:
    """Everything a generate node sends, for the current state."""
    assert node.prompt is not None
    shown, notes = truncate_input(input_, pack.truncate)
    view = {**state, "input": shown}
    before = pack.nodes.get(node.continues) if node.continues is not None else None
    if before is not None and all(w in state for w in before.writes):
        earlier = build_messages(pack, before, state, input_)
        answer = {w: state[w] for w in before.writes}
        prompt = node.prompt.render(view)
        messages = [
            *earlier.messages,
            {"role": "assistant", "content": compact(answer)},
            {"role": "user", "content": prompt},
        ]
        return Built(messages, prompt, notes)
    system = node.system or pack.system
    messages = [{"role": "system", "content": system.render(view) if system is not None else SYSTEM}]
    if node.examples is not None:
        fields = answer_fields(pack, node)
        chosen = choose(node.examples, shown, own=input_, state=state)
        if node.examples.match and len(chosen) < node.examples.count:
            notes.append(few_matched(node.examples, len(chosen), state))
        for example in chosen:
            example_input, _ = truncate_input(example.input, pack.truncate)
            answer = {w: example.expected[w] for w in fields}
            messages.append(
                {"role": "user", "content": node.prompt.render({**example.expected, "input": example_input})}
            )
            messages.append({"role": "assistant", "content": compact(answer)})
    prompt = node.prompt.render(view)
    messages.append({"role": "user", "content": prompt})
    return Built(messages, prompt, notes)


def few_matched(examples: Examples, shown: int, state: Mapping[str, Any]) -> str:
    """The trace note of a call shown fewer examples than `count` because of `match`."""
    values = ", ".join(
        f"{f}={json.dumps(lookup(state, tuple(f.split('.'))), ensure_ascii=False)[:60]}" for f in examples.match
    )
    return f"{shown} of {examples.count} few-shot examples shown: only {shown} in {examples.file} match {values}"


def context_problem(pack: Pack, node: Node, input_: Mapping[str, Any], exc: Exception) -> str:
    """Why a node failed when its request, with every few-shot example dropped, still
    does not fit the model's context: the server's words, and what to change
    (`truncate_advice`)."""
    head = f"input does not fit the model's context: {exc}"
    advice = truncate_advice(pack, node, input_)
    return f"{head}; {advice}" if advice else head


def truncate_advice(
    pack: Pack, node: Node, input_: Mapping[str, Any], over: int = 0, chars_per_token: float = 4.0
) -> str | None:
    """What to change when a node's request does not fit: a `truncate:` rule for the
    longest input text the node reads, as it was sent (or a smaller one, if it has a
    rule); None when the node reads no input text. With `over` (tokens too many, as
    counted), the rule suggested cuts that many tokens' worth of characters and a tenth
    more; without, half the text."""
    shown, _ = truncate_input(input_, pack.truncate)
    read = {r.split(".", 1)[1].split(".", 1)[0] for r in node.reads if r.startswith("input.")}
    texts = {name: len(v) for name, v in shown.items() if isinstance(v, str) and (not read or name in read)}
    if not texts:
        return None
    name = max(texts, key=lambda k: texts[k])
    rule = pack.truncate.get(name)
    keep = int((texts[name] - over * chars_per_token) * 0.9) if over > 0 else texts[name] // 2
    if rule is None:
        return (
            f"input.{name} is {texts[name]} characters and manifest.yaml has no truncate: rule for it "
            f"(e.g. truncate: {{{name}: {{max_chars: {max(200, keep)}, keep: head}}}})"
        )
    return f"input.{name} is already cut to {rule.max_chars} characters: lower its truncate: max_chars"
