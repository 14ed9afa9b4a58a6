"""The generate node's confidence gate (`confidence: {field, min}`): loading it, measuring
one verified draw (runtime.confidence), and deciding whether the node commits or is
unsure. The measure goes on the step either way, for calibration."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any

from runtime.confidence import (
    ConfidenceGate,
    agreement_confidence,
    allowed_values,
    no_confidence,
    value_confidence,
)
from runtime.nodes.base import LoadContext, Outcome

if TYPE_CHECKING:
    from runtime.backends.base import ModelReply
    from runtime.pack.fields import FieldRule
    from runtime.pack.model import Node


def measure(node: Node, reply: ModelReply, draw: Outcome, schema: dict[str, Any] | None) -> None:
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


def apply_gate(
    node: Node, outcome: Outcome, draws: list[Outcome], fields: Mapping[str, FieldRule] | None = None
) -> Outcome:
    """Apply the node's confidence gate to the outcome of its draws. The confidence goes
    on the outcome whatever it decides (an unsure step keeps the value it would have
    committed, for calibration); a node that has none is not held."""
    gate = node.confidence
    if gate is None or outcome.status not in ("ok", "unsure") or not draws:
        return outcome
    # Imported here: runtime.pack's package imports the loader, which imports this module.
    from runtime.pack.fields import compare_key, rule_for

    rule = rule_for(fields or {}, gate.field)

    def key(v: Any) -> Hashable:  # values the same by the field's rule, as the vote groups them
        return compare_key(rule, v)

    values = [d.writes.get(gate.field) for d in draws]
    if outcome.status == "ok":
        value = outcome.writes.get(gate.field)
    else:
        top = Counter(key(v) for v in values).most_common(1)[0][0]
        value = next(v for v in values if key(v) == top)
    mine = next(d for d in draws if key(d.writes.get(gate.field)) == key(value))
    measured = mine.confidence or no_confidence(gate.field, value).to_dict()
    if measured["source"] == "none" and len(draws) > 1:
        measured = agreement_confidence(gate.field, values, value, key).to_dict()
    if outcome.status != "ok":
        # The vote already held the node: calibration must not count it as automatic.
        outcome.confidence = {**measured, "held": "vote"}
        return outcome
    outcome.confidence = measured
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
            prior=outcome.prior,
        )
    return outcome


def _closed_choice(prop: Any) -> bool:
    """A field with a finite set of values (an enum, a const, a boolean, nullable or in
    anyOf/oneOf branches): what runtime.confidence can renormalise over."""
    return isinstance(prop, dict) and allowed_values(prop) is not None


def load_gate(node: Node, spec: dict[str, Any], loader: LoadContext, at: tuple[str, ...]) -> ConfidenceGate:
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
