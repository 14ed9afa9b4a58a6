"""A generate node's label prior (`prior: {field, values}`), after "calibrate before use"
(Zhao et al. 2021): a small model favours some labels whatever the input says.

`values` is the model's share of each label of a closed-choice field on a content-free
input (a label not listed counts as the smallest listed share). After an answer is
verified, each allowed value's share (runtime.confidence.value_shares, from the call's
logprobs) is divided by its prior and the results are renormalised; when another value
comes out on top, it is committed instead of the written one, but only if the answer
with it still verifies (schema and `assert`). Without logprobs nothing changes. The step
records what happened as `prior` (see `apply_prior`). `measure_prior` measures a prior
for a node: the shares on content-free fillers, averaged."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from runtime.backends.base import ModelCall
from runtime.choices import call_schema
from runtime.confidence import Confidence, LabelPrior, allowed_values, value_shares
from runtime.errors import OutputRejected
from runtime.messages import build_messages
from runtime.verify import parse_answer, verify_answer

if TYPE_CHECKING:
    from runtime.backends.base import Backend, ModelReply
    from runtime.nodes.base import LoadContext, Outcome
    from runtime.pack.model import Node, Pack

__all__ = ["LabelPrior", "apply_prior", "load_prior", "measure_prior"]

# The least share measure_prior reports: a prior's values must be above 0.
MIN_SHARE = 1e-6


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _spelled(label: Any) -> str:
    """A label as a key of `values` and of measure_prior's result: a string as it is,
    any other value (true, false, null, a number) as its JSON."""
    return label if isinstance(label, str) else json.dumps(label)


def _labels(node: Node, name: str) -> list[Any] | None:
    """Every value `name` may take at this node: its closed choice in the schema, or for
    a `choices` field every label its label file lists. None for an open field."""
    for choice in node.choices:
        if choice.field == name:
            labels = list(choice.plain) + [label for _, some in choice.table for label in some]
            return list(dict.fromkeys(labels))
    return allowed_values(((node.schema or {}).get("properties") or {}).get(name))


def load_prior(node: Node, spec: dict[str, Any], loader: LoadContext, at: tuple[str, ...]) -> LabelPrior | None:
    """Parse and check `prior:` (after the node's schema, writes and choices are loaded)."""
    raw = spec["prior"]
    where = (*at, "prior")
    if not isinstance(raw, dict) or not isinstance(raw.get("field"), str) or "values" not in raw:
        loader.error("prior must be a mapping {field: NAME, values: {LABEL: P, ...}}", *where)
        return None
    unknown = sorted(set(raw) - {"field", "values"})
    if unknown:
        loader.error(f"prior has unknown key(s) {', '.join(map(repr, unknown))}; it takes field and values", *where)
    name, values = raw["field"], raw["values"]
    props = (node.schema or {}).get("properties", {})
    if node.schema is not None and name not in props:
        loader.error(f"prior: grammars/{node.id}.json has no field '{name}'", *where, "field")
        return None
    if name not in node.writes:
        loader.error(f"prior: node '{node.id}' does not write '{name}'; correct a field it writes", *where, "field")
        return None
    labels = _labels(node, name)
    if node.schema is not None and labels is None:
        loader.error(
            f"prior: '{name}' is not a closed-choice field (an enum, a boolean or a `choices` field) in "
            f"grammars/{node.id}.json; a free value has no labels to correct",
            *where,
            "field",
        )
        return None
    if not isinstance(values, dict) or not values:
        loader.error("prior: values must be a non-empty mapping of labels to probabilities", *where, "values")
        return None
    found: list[tuple[Any, float]] = []
    for key, p in values.items():
        here = (*where, "values", _spelled(key))
        label = next((v for v in labels or [key] if _same(v, key) or _spelled(v) == key), None)
        if labels is not None and label is None:
            loader.error(
                f"nodes.{node.id}.prior.values.{_spelled(key)}: '{_spelled(key)}' is not a value of '{name}' "
                f"(allowed: {', '.join(_spelled(v) for v in labels)})",
                *here,
            )
        elif not isinstance(p, (int, float)) or isinstance(p, bool) or not 0 < p <= 1:
            loader.error(
                f"nodes.{node.id}.prior.values.{_spelled(key)}: must be a probability above 0 and at most 1", *here
            )
        else:
            found.append((label, float(p)))
    return LabelPrior(name, tuple(found)) if len(found) == len(values) else None


def _rescored(prior: LabelPrior, shares: Sequence[tuple[Any, float]]) -> list[tuple[Any, float]] | None:
    """Each value's share divided by its prior, renormalised; best first (the first
    listed of equals, so the written value keeps a tie). None when all are 0."""
    scores = [(v, share / prior.of(v)) for v, share in shares]
    total = sum(s for _, s in scores)
    if total <= 0:
        return None
    return sorted(((v, s / total) for v, s in scores), key=lambda vs: -vs[1])


def apply_prior(
    node: Node,
    reply: ModelReply,
    answer: Any,
    draw: Outcome,
    schema: dict[str, Any] | None,
    state: Mapping[str, Any],
    input_: Mapping[str, Any],
) -> None:
    """Correct one verified draw by the node's prior. `draw.prior` records it: field,
    from (the written value), to (the committed one), scores (each allowed value's
    share / prior, renormalised, best first, as [value, score] pairs), and `reason` when
    the best differs from `to` (the corrected answer did not verify) or when there was
    nothing to score. With a confidence gate on the same field, `draw.confidence` is the
    committed value's score (basis "prior")."""
    prior = node.prior
    assert prior is not None
    name = prior.field
    value = draw.writes.get(name)
    record: dict[str, Any] = {"field": name, "from": value, "to": value}
    draw.prior = record
    allowed = allowed_values(((schema or {}).get("properties") or {}).get(name))
    greedy = node.temperature == 0
    shares = value_shares(reply.text, reply.logprobs, name, value, allowed, greedy) if allowed else None
    scores = _rescored(prior, shares) if shares else None
    if scores is None:
        record["reason"] = (
            "the endpoint returned no logprobs"
            if reply.logprobs is None
            else f"the returned logprobs do not spell the value of '{name}'"
        )
        return
    record["scores"] = [[v, round(s, 6)] for v, s in scores]
    best = scores[0][0]
    if not _same(best, value) and isinstance(answer, dict):
        try:
            draw.writes = verify_answer(node, {**answer, name: best}, state, input_)
            record["to"] = best
        except OutputRejected as exc:
            record["reason"] = f"{json.dumps(best)} scored best, but the answer with it fails {exc}"
    gate = node.confidence
    if gate is not None and gate.field == name:
        committed = record["to"]
        p = next(s for v, s in scores if _same(v, committed))
        rival = next(((v, s) for v, s in scores if not _same(v, committed)), None)
        runner_up = rival[0] if rival is not None and rival[1] > 0 else None
        margin = p - (rival[1] if rival is not None else 0.0)
        draw.confidence = Confidence(
            name, committed, p, margin, "logprobs", basis="prior", runner_up=runner_up
        ).to_dict()


def _filled(reads: Sequence[str], filler: str) -> dict[str, Any]:
    """The run input with every input field in `reads` set to `filler`."""
    out: dict[str, Any] = {}
    for ref in reads:
        parts = ref.split(".")
        if parts[0] != "input" or len(parts) < 2:
            continue
        here = out
        for part in parts[1:-1]:
            if not isinstance(here.get(part), dict):
                here[part] = {}
            here = here[part]
        here[parts[-1]] = filler
    return out


def _field(node: Node) -> str:
    """The field a prior is measured on: the prior's, the gate's, else the first written
    closed-choice field."""
    if node.prior is not None:
        return node.prior.field
    if node.confidence is not None and _labels(node, node.confidence.field) is not None:
        return node.confidence.field
    for name in node.writes:
        if _labels(node, name) is not None:
            return name
    raise ValueError(f"node '{node.id}' writes no closed-choice field to measure a prior on")


def _shares(reply: ModelReply, name: str, allowed: Sequence[Any], greedy: bool) -> dict[str, float] | None:
    """Each allowed value's share in one reply (keys as `_spelled`); None when the
    reply cannot say (no logprobs, an unparsable answer, a value not allowed)."""
    try:
        answer = parse_answer(reply.text, reply.finish_reason)
    except OutputRejected:
        return None
    if not isinstance(answer, dict) or not any(_same(v, answer.get(name)) for v in allowed):
        return None
    shares = value_shares(reply.text, reply.logprobs, name, answer.get(name), allowed, greedy)
    if shares is None:
        return None
    return {_spelled(v): s for v, s in shares}


def measure_prior(
    pack: Pack,
    node_id: str,
    backend: Backend,
    *,
    state: Mapping[str, Any] | None = None,
    fillers: Sequence[str] = ("N/A", "", "[MASK]"),
) -> dict[str, float] | None:
    """The prior of a generate node's closed-choice field (the node's `prior` field, else
    its `confidence` field, else the first closed-choice field it writes): per filler,
    the node's messages with every input field it reads set to the filler (and `state`
    for the state fields it reads) are sent once, with the node's schema as the grammar
    and logprobs asked for; the allowed values' shares are averaged over the fillers
    whose reply had them. Keys are the labels (a non-string label as its JSON); each
    value is at least MIN_SHARE, so the result can be written as `prior: values` as it
    is. None when no reply had logprobs. The reasoning stage of `two_stage` is not run."""
    node = pack.nodes[node_id]
    if node.kind != "generate" or node.prompt is None:
        raise ValueError(f"node '{node_id}' is not a generate node")
    name = _field(node)
    view_state = dict(state or {})
    sums: dict[str, float] = {}
    measured = 0
    for n, filler in enumerate(fillers, start=1):
        input_ = _filled(node.reads, filler)
        schema, _ = call_schema(node.schema, node.validator, node.choices, {**view_state, "input": input_})
        allowed = allowed_values(((schema or {}).get("properties") or {}).get(name)) or []
        built = build_messages(pack, node, view_state, input_)
        call = ModelCall(
            run_id="prior",
            node=node.id,
            attempt=n,
            messages=built.messages,
            schema=schema,
            max_tokens=node.max_tokens,
            temperature=node.temperature,
            input=input_,
            logprobs=True,
        )
        shares = _shares(backend.complete(call), name, allowed, node.temperature == 0)
        if shares is None:
            continue
        measured += 1
        for label, share in shares.items():
            sums[label] = sums.get(label, 0.0) + share
    if not measured:
        return None
    return {label: max(MIN_SHARE, total / measured) for label, total in sums.items()}
