"""The generate node's confidence gate (`confidence: {field, min}`, or `{fields, min}` on
the least sure of several): loading it, measuring one verified draw
(runtime.confidence), and deciding whether the node commits or is unsure. The measure
goes on the step either way, for calibration."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Mapping
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
    """Put the logprob confidence of one verified draw on it: its least sure gated
    field's (source "none", and why, when the reply's logprobs cannot say for some
    field). A closed field's is renormalised over the values the schema sent for this
    call allows for it, an open field's is its tokens' plain product (runtime.confidence)."""
    gate = node.confidence
    assert gate is not None
    props = (schema or {}).get("properties") or {}
    greedy = node.temperature == 0  # the written tokens were the likeliest the grammar allowed
    measured: list[dict[str, Any]] = []
    for name in gate.fields:
        value = draw.writes.get(name)
        found = value_confidence(reply.text, reply.logprobs, name, value, allowed_values(props.get(name)), greedy)
        if found is None:
            draw.reason = (
                "the endpoint returned no logprobs"
                if reply.logprobs is None
                else f"the returned logprobs do not spell the value of '{name}'"
            )
            found = no_confidence(name, value)
        measured.append(found.to_dict())
    draw.confidence = least_sure(gate, measured)


def least_sure(gate: ConfidenceGate, measured: list[dict[str, Any]]) -> dict[str, Any]:
    """One measure per gated field -> the gate's: the least sure field's (one that could
    not be measured, p None, first). A gate on several fields adds each field's `p` as
    `fields` and its value as `values`, for calibration."""
    worst = min(measured, key=lambda m: -1.0 if m["p"] is None else m["p"])
    if not gate.also:
        return worst
    return {
        **worst,
        "fields": {m["field"]: m["p"] for m in measured},
        "values": {m["field"]: m["value"] for m in measured},
    }


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

    rules = {name: rule_for(fields or {}, name) for name in gate.fields}

    def by_rule(name: str) -> Callable[[Any], Hashable]:  # a field's values, the same by its rule
        return lambda v: compare_key(rules[name], v)

    def key(writes: Mapping[str, Any]) -> Hashable:  # the gated values, the same as the vote groups them
        return tuple(compare_key(rules[name], writes.get(name)) for name in gate.fields)

    if outcome.status == "ok":
        chosen = key(outcome.writes)
    else:
        chosen = Counter(key(d.writes) for d in draws).most_common(1)[0][0]
    mine = next(d for d in draws if key(d.writes) == chosen)
    measured = mine.confidence or least_sure(
        gate, [no_confidence(name, mine.writes.get(name)).to_dict() for name in gate.fields]
    )
    if measured["source"] == "none" and len(draws) > 1:
        measured = least_sure(
            gate,
            [
                agreement_confidence(
                    name, [d.writes.get(name) for d in draws], mine.writes.get(name), by_rule(name)
                ).to_dict()
                for name in gate.fields
            ],
        )
    if outcome.status != "ok":
        # The vote already held the node: calibration must not count it as automatic.
        outcome.confidence = {**measured, "held": "vote"}
        return outcome
    outcome.confidence = measured
    p = measured["p"]
    if p is None:
        outcome.reason = (
            f"no confidence on '{measured['field']}': {mine.reason or 'none measured'}, and with samples 1 there "
            "is no agreement to fall back on; the gate did not hold the node"
        )
        return outcome
    if p < gate.min:
        return Outcome(
            "unsure",
            attempt=outcome.attempt,
            reason=f"confidence {p:.3g} < {gate.min:g} on '{measured['field']}' ({measured['source']})",
            prompt=outcome.prompt,
            confidence=measured,
            prior=outcome.prior,
        )
    return outcome


def load_gate(node: Node, spec: dict[str, Any], loader: LoadContext, at: tuple[str, ...]) -> ConfidenceGate:
    """`confidence: {field: NAME, min: P}` or `{fields: [NAME, ...], min: P}`; every
    problem is reported, not just the first."""
    raw = spec["confidence"]
    where = (*at, "confidence")
    usage = "{field: NAME, min: P} or {fields: [NAME, ...], min: P}, e.g. {field: label, min: 0.8}"
    named = raw.get("fields", raw.get("field")) if isinstance(raw, dict) else None
    names = [named] if isinstance(named, str) else named
    if (
        not isinstance(raw, dict)
        or ("field" in raw) == ("fields" in raw)
        or not isinstance(names, list)
        or not names
        or not all(isinstance(n, str) for n in names)
        or "min" not in raw
    ):
        loader.error(f"confidence must be a mapping {usage}", *where)
        return ConfidenceGate("", 0.0)  # the pack is refused; see below
    key = "fields" if "fields" in raw else "field"
    unknown = sorted(set(raw) - {key, "min"})
    if unknown:
        loader.error(f"confidence has unknown key(s) {', '.join(map(repr, unknown))}; it takes {key} and min", *where)
    low = raw["min"]
    ok = True
    props = (node.schema or {}).get("properties", {})
    for name in names:
        if node.schema is not None and name not in props:
            loader.error(f"confidence: grammars/{node.id}.json has no field '{name}'", *where, key)
            ok = False
        elif name not in node.writes:
            loader.error(
                f"confidence: node '{node.id}' does not write '{name}'; gate on a field it writes", *where, key
            )
            ok = False
    if len(set(names)) != len(names):
        loader.error(f"confidence: {key} names a field twice", *where, key)
        ok = False
    if len(names) > 1 and "prior" in spec:
        loader.error("confidence: a gate on several fields does not combine with prior; gate on one", *where, key)
        ok = False
    if not isinstance(low, (int, float)) or isinstance(low, bool) or not 0 < low <= 1:
        loader.error("confidence: min must be a number above 0 and at most 1, e.g. 0.8", *where, "min")
        ok = False
    if not ok:
        # The pack is refused for the errors above; the gate is still set, so that the
        # graph checks do not add "on_unsure without samples or confidence" to them.
        low = low if isinstance(low, (int, float)) else 0.0
    return ConfidenceGate(names[0], float(low), tuple(names[1:]))
