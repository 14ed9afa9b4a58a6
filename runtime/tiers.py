"""Model tiers: a ladder of backends, small to large, that a generate node climbs when
it fails its ladder, is unsure, or keeps failing its assert (docs/tiers.md); and what
a person's answer at a node must pass before it is committed (`check_answer`), with
the schema a review form is built from (`node_schema`).

A leaf of the walker: it knows nodes, schemas and verification, not runs."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from runtime.choices import NoChoices, call_schema
from runtime.errors import ExprError, OutputRejected
from runtime.verify import describe_schema_error, verify_answer

if TYPE_CHECKING:
    from runtime.backends.base import Backend
    from runtime.pack.model import Node, Pack
    from runtime.trace_items import Attempt, Candidate

PERSON = "person"  # the tier past the last model tier: `to` of the last escalation, a Step's `tier`


@dataclass(frozen=True)
class Tier:
    """One rung of the ladder: a name (shown in traces and reports) and its model."""

    name: str
    backend: Backend


def check_tiers(tiers: list[Tier]) -> None:
    names = [t.name for t in tiers]
    if not names:
        raise ValueError("tiers: give at least one tier, or None for a run without tiers")
    if len(set(names)) != len(names) or PERSON in names or any(not n for n in names):
        raise ValueError(f"tiers need distinct, non-empty names other than {PERSON!r}; got {names}")


def _split(pack: Pack, node_id: str, state: Mapping[str, Any]) -> tuple[Node, dict[str, Any], dict[str, Any]]:
    if node_id not in pack.nodes:
        raise KeyError(f"pack '{pack.name}' has no node '{node_id}'")
    committed = {k: v for k, v in state.items() if k != "input"}
    given = state.get("input")
    return pack.nodes[node_id], committed, dict(given) if isinstance(given, Mapping) else {}


def node_schema(pack: Pack, node_id: str, state: Mapping[str, Any]) -> dict[str, Any] | None:
    """The JSON schema an answer at `node_id` must follow in this state: the node's
    grammars/<node>.json, with each `choices` field's enum set to the labels the state
    allows (what the model was sent). `state`: the committed state, the run's input
    under "input". None for a node that has no schema."""
    node, committed, given = _split(pack, node_id, state)
    try:
        schema, _ = call_schema(node.schema, node.validator, node.choices, {**committed, "input": given})
    except NoChoices:
        return node.schema
    return schema


def check_answer(pack: Pack, node_id: str, state: Mapping[str, Any], answer: Any) -> list[str]:
    """Why `answer` may not be committed at `node_id` in this state (`state`: committed
    state, the run's input under "input"): every schema error (per-call `choices`
    included), missing written fields, the node's `assert`. [] when it may be."""
    node, committed, given = _split(pack, node_id, state)
    try:
        _, validator = call_schema(node.schema, node.validator, node.choices, {**committed, "input": given})
    except NoChoices as exc:
        return [str(exc)]
    reasons: list[str] = []
    if validator is not None:
        reasons = sorted({describe_schema_error(e) for e in validator.iter_errors(answer)})
    if reasons:
        return reasons
    if not isinstance(answer, dict):
        return ["the answer must be a JSON object"]
    missing = [w for w in node.writes if w not in answer]
    if missing:
        return [f"the answer is missing field(s): {', '.join(missing)}"]
    if node.check is not None:
        trial = {**committed, **{w: answer[w] for w in node.writes}, "input": given}
        try:
            ok = node.check.truthy(trial)
        except ExprError:
            return [f"the check `{node.check.source}` could not be evaluated"]
        if not ok:
            return [f"the answer fails the check `{node.check.source}`"]
    return []


def person_writes(pack: Pack, node_id: str, state: Mapping[str, Any], answer: Any) -> dict[str, Any]:
    """The writes of a person's answer, or OutputRejected with every reason."""
    reasons = check_answer(pack, node_id, state, answer)
    if reasons:
        raise OutputRejected("answer", "; ".join(reasons))
    node, committed, given = _split(pack, node_id, state)
    schema, validator = call_schema(node.schema, node.validator, node.choices, {**committed, "input": given})
    checked = dataclasses.replace(node, schema=schema, validator=validator) if schema is not node.schema else node
    return verify_answer(checked, answer, committed, given)


def candidates(
    attempts: list[Attempt], node_id: str, tier: str, status: str, reason: str, committed: dict[str, Any]
) -> list[Candidate]:
    """The answers the model gave at `node_id` on `tier` (from its attempts), each with
    its status: "rejected" (verification refused it), "ok" (verified, and what the node
    committed), "unsure" (verified, but this tier did not settle the node with it)."""
    out: list[Candidate] = []
    for a in attempts:
        if a.node != node_id or a.stage in ("reasoning", "lookahead"):  # not answers the node was given
            continue
        answer = _parsed(a.text)
        if a.given and isinstance(answer, dict):  # a quorum's later draw: with the settled values
            answer = {**answer, **a.given}
        if not a.ok:
            out.append({"tier": tier, "answer": answer, "status": "rejected", "reason": f"{a.category}: {a.reason}"})
            continue
        settled = status == "ok" and isinstance(answer, dict) and all(answer.get(k) == v for k, v in committed.items())
        out.append(
            {
                "tier": tier,
                "answer": answer,
                "status": "ok" if settled else "unsure",
                "reason": "" if settled else reason,
            }
        )
    return out


def _parsed(text: str) -> Any:
    body = text.strip()
    if body.startswith("```"):
        body = body.strip("`").removeprefix("json").strip()
    try:
        value = json.loads(body)
    except (json.JSONDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
