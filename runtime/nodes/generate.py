"""`generate`: one schema-constrained model answer, verified before commit.

The ladder: sample; re-sample (`resamples` times); re-sample told what was wrong
(`feedback` times; the description, never the rejected text); then fail, which takes
on_fail. With a run-wide `budget`, retries draw on the budget instead. With
`samples: N`, N verified draws must agree (`agree`) on the written fields, or the
node is unsure and takes on_unsure. With `confidence: {field, min}`, the node's calls
ask for logprobs and the node is also unsure when its confidence in that closed-choice
field is below `min` (runtime.confidence); the confidence is on the step either way."""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any

from runtime.confidence import (
    ConfidenceGate,
    agreement_confidence,
    allowed_values,
    no_confidence,
    value_confidence,
)
from runtime.errors import OutputRejected
from runtime.nodes.base import LoadContext, NodeDrawing, Outcome, RunContext, covered
from runtime.verify import feedback_message, parse_answer, verify_answer

if TYPE_CHECKING:
    from runtime.backends.base import ModelReply
    from runtime.pack.model import Node

SYSTEM = "You fill in one JSON object that follows the given schema. Reply with the JSON object only."
THINK = "Before answering, think step by step about the request above. Do not give the final JSON yet."
ANSWER = "Now give the final answer as one JSON object that follows the schema."


class GenerateKind:
    name = "generate"
    keys = frozenset({"assert", "two_stage", "samples", "agree", "max_tokens", "temperature", "retry", "confidence"})
    drawing = NodeDrawing(shape="rounded", css_class="node-generate", label="generate", mermaid=('["', '"]'))
    terminal = False
    can_fail = True
    waits = False
    asks_model = True

    def load(self, node: Node, spec: dict[str, Any], loader: LoadContext) -> None:
        at = ("nodes", node.id)
        node.prompt = loader.prompt(node, required=True)
        node.schema, node.validator = loader.schema(node.id, required=True)
        if not node.writes:
            loader.error(f"generate node '{node.id}' must declare 'writes', the fields its answer fills", *at)
        props = (node.schema or {}).get("properties", {})
        for w in node.writes:
            if node.schema is not None and w not in props:
                loader.error(
                    f"node '{node.id}' writes '{w}', but grammars/{node.id}.json has no such property", *at, "writes"
                )
        if "assert" in spec:
            node.check = loader.expr(spec["assert"], *at, "assert")
            if node.check is not None:
                for ref in sorted(node.check.references):
                    if not covered(ref, node.reads + node.writes):
                        loader.error(
                            f"node '{node.id}': assert uses '{ref}', which is neither read nor written", *at, "assert"
                        )
        node.two_stage = _flag(spec, "two_stage", loader, at)
        node.samples = _int(spec, "samples", 1, 1, 15, loader, at)
        node.agree = _int(spec, "agree", node.samples // 2 + 1, 1, node.samples, loader, at)
        node.max_tokens = _int(spec, "max_tokens", 256, 1, 32768, loader, at)
        temperature = spec.get("temperature", 0.7 if node.samples > 1 else 0.0)
        if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or not 0 <= temperature <= 2:
            loader.error("temperature must be a number from 0 to 2", *at, "temperature")
        else:
            node.temperature = float(temperature)
        node.retry = loader.retry(spec.get("retry"), *at, "retry")
        if "confidence" in spec:
            node.confidence = _confidence_gate(node, spec, loader, at)

    def run(self, node: Node, walk: RunContext) -> Outcome:
        assert node.prompt is not None
        prompt = node.prompt.render(walk.view())
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
        if node.samples == 1:
            outcome = self._ladder(node, walk, messages)
            outcome.prompt = prompt
            return _gate(node, outcome, [outcome])
        draws: list[Outcome] = []
        for _ in range(node.samples):
            draw = self._ladder(node, walk, messages)
            if draw.status != "ok":
                draw.prompt = prompt
                return draw
            draws.append(draw)
        counts = Counter(json.dumps(d.writes, sort_keys=True) for d in draws)
        best, count = counts.most_common(1)[0]
        if count < node.agree:
            tally = ", ".join(str(c) for c in sorted(counts.values(), reverse=True))
            return _gate(
                node,
                Outcome(
                    "unsure", reason=f"draws disagreed ({tally} of {node.samples}; need {node.agree})", prompt=prompt
                ),
                draws,
            )
        chosen = next(d for d in draws if json.dumps(d.writes, sort_keys=True) == best)
        return _gate(node, Outcome("ok", writes=chosen.writes, attempt=chosen.attempt, prompt=prompt), draws)

    def _ladder(self, node: Node, walk: RunContext, messages: list[dict[str, str]]) -> Outcome:
        policy = walk.pack.retry_for(node)
        tries = 0
        reason = ""
        while True:
            tries += 1
            stage = "sample" if tries == 1 else ("resample" if tries <= 1 + policy.resamples else "feedback")
            asked = messages + ([{"role": "user", "content": feedback_message(reason)}] if stage == "feedback" else [])
            if node.two_stage:
                thought, attempt = walk.ask(
                    node, [*asked, {"role": "user", "content": THINK}], None, stage, "reasoning"
                )
                walk.record(node, thought, attempt, "reasoning", ok=True)
                # The reasoning conditions this answer only; it never enters state or a later prompt.
                asked = [*asked, {"role": "assistant", "content": thought.text}, {"role": "user", "content": ANSWER}]
            schema = node.schema  # the schema (grammar) sent for this call
            reply, attempt = walk.ask(node, asked, schema, stage, logprobs=node.confidence is not None)
            try:
                answer = parse_answer(reply.text, reply.finish_reason)
                if walk.verify:
                    writes = verify_answer(node, answer, walk.state, walk.input)
                else:
                    writes = {w: answer.get(w) for w in node.writes} if isinstance(answer, dict) else {}
            except OutputRejected as exc:
                walk.record(node, reply, attempt, stage, ok=False, category=exc.category, reason=exc.reason)
                reason = exc.reason
                if walk.verify and _may_retry(policy, tries, walk):
                    continue
                return Outcome("fail", reason=f"{exc.category}: {exc.reason} (after {tries} attempt(s))")
            walk.record(node, reply, attempt, stage, ok=True)
            outcome = Outcome("ok", writes=writes, attempt=attempt)
            if node.confidence is not None:
                _measure(node, reply, outcome, schema)
            return outcome


def _measure(node: Node, reply: ModelReply, draw: Outcome, schema: dict[str, Any] | None) -> None:
    """Put the logprob confidence of one verified draw on it (source "none", and why,
    when the reply's logprobs cannot say). It is renormalised over the values that the
    schema sent for this call allows for the field (runtime.confidence)."""
    gate = node.confidence
    assert gate is not None
    value = draw.writes.get(gate.field)
    allowed = allowed_values(((schema or {}).get("properties") or {}).get(gate.field))
    greedy = node.temperature == 0  # the written tokens were the likeliest the grammar allowed
    found = value_confidence(reply.text, reply.logprobs, gate.field, value, allowed, greedy)
    if found is None:
        draw.reason = (
            "the endpoint returned no logprobs"
            if reply.logprobs is None
            else f"the returned logprobs do not spell the value of '{gate.field}'"
        )
        found = no_confidence(gate.field, value)
    draw.confidence = found.to_dict()


def _gate(node: Node, outcome: Outcome, draws: list[Outcome]) -> Outcome:
    """Apply the node's confidence gate to the outcome of its draws. The confidence goes
    on the outcome whatever it decides (an unsure step keeps the value it would have
    committed, for calibration); a node that has none is not held."""
    gate = node.confidence
    if gate is None or outcome.status not in ("ok", "unsure") or not draws:
        return outcome
    values = [d.writes.get(gate.field) for d in draws]
    if outcome.status == "ok":
        value = outcome.writes.get(gate.field)
    else:
        counts = Counter(json.dumps(v, sort_keys=True) for v in values)
        value = json.loads(counts.most_common(1)[0][0])
    mine = next(
        d for d in draws if json.dumps(d.writes.get(gate.field), sort_keys=True) == json.dumps(value, sort_keys=True)
    )
    measured = mine.confidence or no_confidence(gate.field, value).to_dict()
    if measured["source"] == "none" and len(draws) > 1:
        measured = agreement_confidence(gate.field, values, value).to_dict()
    outcome.confidence = measured
    if outcome.status != "ok":
        return outcome
    p = measured["p"]
    if p is None:
        outcome.reason = (
            f"no confidence on '{gate.field}': {mine.reason or 'none measured'}, and with samples 1 there is no "
            "agreement to fall back on; the gate did not hold the node"
        )
        return outcome
    if p < gate.min:
        return Outcome(
            "unsure",
            attempt=outcome.attempt,
            reason=f"confidence {p:.3g} < {gate.min:g} on '{gate.field}' ({measured['source']})",
            prompt=outcome.prompt,
            confidence=measured,
        )
    return outcome


def _closed_choice(prop: Any) -> bool:
    if not isinstance(prop, dict):
        return False
    kinds = prop.get("type")
    return "enum" in prop or "const" in prop or kinds == "boolean" or kinds == ["boolean"]


def _confidence_gate(node: Node, spec: dict[str, Any], loader: LoadContext, at: tuple[str, ...]) -> ConfidenceGate:
    raw = spec["confidence"]
    where = (*at, "confidence")
    if not isinstance(raw, dict) or not isinstance(raw.get("field"), str) or "min" not in raw:
        loader.error("confidence must be a mapping {field: NAME, min: P}, e.g. {field: label, min: 0.8}", *where)
        return ConfidenceGate("", 0.0)  # the pack is refused; see below
    unknown = sorted(set(raw) - {"field", "min"})
    if unknown:
        loader.error(f"confidence has unknown key(s) {', '.join(map(repr, unknown))}; it takes field and min", *where)
    name, low = raw["field"], raw["min"]
    ok = True  # every problem is reported, not just the first
    props = (node.schema or {}).get("properties", {})
    choices = spec.get("choices")
    if node.schema is not None and name not in props:
        loader.error(f"confidence: grammars/{node.id}.json has no field '{name}'", *where, "field")
        ok = False
    elif name not in node.writes:
        loader.error(
            f"confidence: node '{node.id}' does not write '{name}'; gate on a field it writes", *where, "field"
        )
        ok = False
    elif node.schema is not None and not (
        _closed_choice(props[name]) or (isinstance(choices, dict) and name in choices)
    ):
        loader.error(
            f"confidence: '{name}' is not a closed-choice field (an enum, a boolean or a `choices` field) in "
            f"grammars/{node.id}.json; a free value has no probability to gate on",
            *where,
            "field",
        )
        ok = False
    if not isinstance(low, (int, float)) or isinstance(low, bool) or not 0 < low <= 1:
        loader.error("confidence: min must be a number above 0 and at most 1, e.g. 0.8", *where, "min")
        ok = False
    if not ok:
        # The pack is refused for the errors above; the gate is still set, so that the
        # graph checks do not add "on_unsure without samples or confidence" to them.
        low = low if isinstance(low, (int, float)) else 0.0
    return ConfidenceGate(name, float(low))


def _may_retry(policy: Any, tries: int, walk: RunContext) -> bool:
    if policy.budget is None:
        return bool(tries < policy.ladder_attempts)
    if tries >= policy.max_attempts or not walk.budget_left:
        return False
    walk.budget_left -= 1
    return True


def _flag(spec: dict[str, Any], key: str, loader: LoadContext, at: tuple[str, ...]) -> bool:
    value = spec.get(key, False)
    if not isinstance(value, bool):
        loader.error(f"{key} must be true or false", *at, key)
        return False
    return value


def _int(
    spec: dict[str, Any], key: str, default: int, low: int, high: int, loader: LoadContext, at: tuple[str, ...]
) -> int:
    value = spec.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        loader.error(f"{key} must be a whole number from {low} to {high}", *at, key)
        return default
    return value
