"""The generate node's confidence gate (`confidence: {field, min}`, or `{fields, min}` on
the least sure of several): loading it, measuring one verified draw
(runtime.confidence), and deciding whether the node commits or is unsure. The measure
goes on the step either way, for calibration."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from runtime.confidence import (
    Confidence,
    ConfidenceGate,
    allowed_values,
    no_confidence,
    value_confidence,
)
from runtime.nodes.base import LoadContext, Outcome

if TYPE_CHECKING:
    from runtime.backends.base import ModelReply
    from runtime.pack.fields import FieldRule
    from runtime.pack.model import Node


def measure(node: Node, reply: ModelReply, draw: Outcome, schema: dict[str, Any] | None, written: Any = None) -> None:
    """Put the logprob confidence of one verified draw on it: its least sure gated
    field's (see `least_sure` for a field the reply's logprobs cannot say). A closed
    field's is renormalised over the values the schema sent for this call allows for it,
    an open field's is its tokens' plain product (runtime.confidence). `written`: the
    answer as the model wrote it (before a set field was sorted), the value the tokens spell."""
    gate = node.confidence
    assert gate is not None
    props = (schema or {}).get("properties") or {}
    greedy = node.temperature == 0  # the written tokens were the likeliest the grammar allowed
    spelled = written if isinstance(written, dict) else draw.writes
    measured: list[dict[str, Any]] = []
    for name in gate.fields:
        value = spelled.get(name, draw.writes.get(name))
        found = value_confidence(reply.text, reply.logprobs, name, value, allowed_values(props.get(name)), greedy)
        measured.append((found or no_confidence(name, draw.writes.get(name))).to_dict())
    draw.confidence = least_sure(gate, measured)
    if draw.confidence["p"] is None:  # why the least sure field has no measure
        draw.reason = (
            "the endpoint returned no logprobs"
            if reply.logprobs is None
            else f"the returned logprobs do not spell the value of '{draw.confidence['field']}'"
        )


def least_sure(gate: ConfidenceGate, measured: list[dict[str, Any]]) -> dict[str, Any]:
    """One measure per gated field -> the gate's: the least sure field's. A field with no
    measure (p None) is the least sure of all: a gate on several fields must not pass an
    answer because the field it could not read was left out of the minimum. A gate on
    several fields adds each field's `p` as `fields` and its value as `values`, for
    calibration."""
    worst = min(measured, key=lambda m: -1.0 if m["p"] is None else m["p"])
    if not gate.also:
        return worst
    return {
        **worst,
        "fields": {m["field"]: m["p"] for m in measured},
        "values": {m["field"]: m["value"] for m in measured},
    }


def _agreement(name: str, rule: FieldRule, values: list[Any], value: Any) -> dict[str, Any]:
    """The share of draws whose `name` equals `value` by the field's rule, as the vote
    compares it (a `number` tolerance, a scorer); margin over the largest other group."""
    from runtime.pack.fields import group, matches

    same = [matches(rule, value, v) for v in values]
    others = [v for v, s in zip(values, same, strict=True) if not s]
    total = max(1, len(values))
    p = sum(same) / total
    runner_up = max((len(g) for g in group(rule, others)), default=0) / total
    return Confidence(name, value, p, p - runner_up, "agreement").to_dict()


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
    from runtime.pack.fields import matches, rule_for

    rules = {name: rule_for(fields or {}, name) for name in gate.fields}

    def same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:  # equal on every gated field, as the vote compares
        return all(matches(rules[name], a.get(name), b.get(name)) for name in gate.fields)

    if outcome.status == "ok":
        mine = next((d for d in draws if same(d.writes, outcome.writes)), draws[0])
    else:  # the draws disagreed: the value the largest group of them would have committed
        mine = max(draws, key=lambda d: sum(same(d.writes, other.writes) for other in draws))
    measured = mine.confidence or least_sure(
        gate, [no_confidence(name, mine.writes.get(name)).to_dict() for name in gate.fields]
    )
    if measured["source"] == "none" and len(draws) > 1:
        values = {name: [d.writes.get(name) for d in draws] for name in gate.fields}
        measured = least_sure(
            gate, [_agreement(name, rules[name], values[name], mine.writes.get(name)) for name in gate.fields]
        )
    if outcome.status != "ok":
        # The vote already held the node: calibration must not count it as automatic.
        outcome.confidence = {**measured, "held": "vote"}
        return outcome
    outcome.confidence = measured

    def held(reason: str) -> Outcome:  # unsure: nothing committed, the measure kept
        return Outcome(
            "unsure",
            attempt=outcome.attempt,
            reason=reason,
            prompt=outcome.prompt,
            confidence=measured,
            prior=outcome.prior,
        )

    p = measured["p"]
    if p is None:
        why = f"no confidence on '{measured['field']}': {mine.reason or 'none measured'}"
        if gate.also and any(m is not None for m in (measured.get("fields") or {}).values()):
            return held(f"{why}; a gate on several fields holds an answer it cannot read in full")
        outcome.reason = (
            f"{why}, and with samples 1 there is no agreement to fall back on; the gate did not hold the node"
        )
        return outcome
    if p < gate.min:
        return held(f"confidence {p:.3g} < {gate.min:g} on '{measured['field']}' ({measured['source']})")
    return outcome


def load_gate(node: Node, spec: dict[str, Any], loader: LoadContext, at: tuple[str, ...]) -> ConfidenceGate:
    """`confidence: {field: NAME, min: P}` or `{fields: [NAME, ...], min: P}`; every
    problem is reported, not just the first."""
    raw = spec["confidence"]
    where = (*at, "confidence")
    usage = "{field: NAME, min: P} or {fields: [NAME, ...], min: P}, e.g. {field: label, min: 0.8}"
    if not isinstance(raw, dict) or "min" not in raw or ("field" not in raw and "fields" not in raw):
        loader.error(f"confidence must be a mapping {usage}", *where)
        return ConfidenceGate("", 0.0)  # the pack is refused; see below
    if "field" in raw and "fields" in raw:
        loader.error("confidence takes field (one) or fields (several), not both", *where)
        return ConfidenceGate("", 0.0)
    key = "fields" if "fields" in raw else "field"
    named = raw[key]
    if key == "field" and not isinstance(named, str):
        loader.error("confidence: field must be one field's name; for several, write fields: [NAME, ...]", *where, key)
        return ConfidenceGate("", 0.0)
    if key == "fields" and (not isinstance(named, list) or not named or not all(isinstance(n, str) for n in named)):
        loader.error("confidence: fields must be a list of field names, e.g. fields: [name, city]", *where, key)
        return ConfidenceGate("", 0.0)
    names: list[str] = [named] if isinstance(named, str) else list(dict.fromkeys(named))
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
    if isinstance(named, list) and len(names) != len(named):
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
