"""Verification before commit: parse, schema, the node's own check.

Reasons built here describe what was wrong using only the pack's own text (schema
paths and values, the check's source), never the rejected answer, because reasons
are shown to the model on the feedback re-sample (docs/invariants.md, 2)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jsonschema.exceptions import ValidationError, best_match

from runtime.errors import ExprError, OutputRejected

if TYPE_CHECKING:
    from runtime.pack.fields import FieldRule
    from runtime.pack.model import Node

REJECTION_CATEGORIES = ("truncated", "parse", "schema", "assert", "disagree", "backend")


def describe_schema_error(error: ValidationError) -> str:
    """Say what the schema wanted, located by schema path (never instance data)."""
    names: list[str] = []
    segments = list(error.relative_schema_path)[:-1]
    for i, seg in enumerate(segments):
        if i > 0 and segments[i - 1] == "properties":
            names.append(str(seg))
        elif seg == "items":
            names.append("[]")
    where = ".".join(names).replace(".[]", "[]") or "the answer"
    v: Any = error.validator_value
    kind: Any = error.validator
    if kind == "required":
        found: Any = error.instance
        instance = found if isinstance(found, dict) else {}
        missing = [k for k in v if k not in instance]
        return f"{where} is missing required field(s): {', '.join(missing)}"
    if kind == "enum":
        return f"{where} must be one of: {', '.join(json.dumps(x) for x in v)}"
    if kind == "const":
        return f"{where} must be exactly {json.dumps(v)}"
    if kind == "type":
        return f"{where} must be of type {v}"
    if kind == "additionalProperties":
        return f"{where} has fields the schema does not allow; use only the listed fields"
    limits = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
    if kind in limits:
        return f"{where} must be {limits[kind]} {v}"
    if kind == "pattern":
        return f"{where} must match the pattern {v}"
    return f"{where} fails the schema rule {kind}={json.dumps(v)}"


def parse_answer(text: str, finish_reason: str) -> Any:
    if finish_reason == "length":
        raise OutputRejected("truncated", "the answer was cut off before it ended; give a shorter answer")
    body = text.strip()
    if body.startswith("```"):
        body = body.strip("`").removeprefix("json").strip()
    try:
        return json.loads(body)
    except (json.JSONDecodeError, RecursionError):
        raise OutputRejected("parse", "the answer was not a single valid JSON object") from None


def verify_answer(node: Node, answer: Any, state: Mapping[str, Any], input_: Mapping[str, Any]) -> dict[str, Any]:
    """Return the node's writes taken from `answer`, or raise OutputRejected."""
    if node.validator is not None:
        error = best_match(node.validator.iter_errors(answer))
        if error is not None:
            raise OutputRejected("schema", describe_schema_error(error))
    if not isinstance(answer, dict):
        raise OutputRejected("schema", "the answer must be a JSON object")
    missing = [w for w in node.writes if w not in answer]
    if missing:
        raise OutputRejected("schema", f"the answer is missing field(s): {', '.join(missing)}")
    writes = {w: answer[w] for w in node.writes}
    if node.check is not None:
        trial = {**state, **writes, "input": input_}
        try:
            ok = node.check.truthy(trial)
        except ExprError:
            raise OutputRejected("assert", f"the check `{node.check.source}` could not be evaluated") from None
        if not ok:
            raise OutputRejected("assert", f"the answer fails the check `{node.check.source}`")
    return writes


def as_sets(node: Node, fields: Mapping[str, FieldRule], answer: Any) -> tuple[Any, list[str]]:
    """`answer` with each set-valued write taken as a set before verification: a field
    the manifest compares as `set` whose grammar is an array of strings with
    `uniqueItems` is de-duplicated and sorted. A grammar sent as GBNF or JSON schema
    cannot forbid a repeated item (llama.cpp's cannot), and a repeat does not change the
    set the field means; so it is not a reason to reject a draw. A note per field changed,
    for the trace (docs/pack-format.md, "Set-valued fields")."""
    props = (node.schema or {}).get("properties", {})
    if not isinstance(answer, dict) or not isinstance(props, dict):
        return answer, []
    notes: list[str] = []
    fixed = dict(answer)
    for name in node.writes:
        rule, spec, value = fields.get(name), props.get(name), answer.get(name)
        if rule is None or rule.compare != "set" or not isinstance(spec, dict) or not spec.get("uniqueItems"):
            continue
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            continue  # the schema check says what is wrong with it
        taken = sorted(set(value))
        if taken != value:
            repeats = len(value) - len(taken)
            said = f"{repeats} repeated item{'s' if repeats != 1 else ''} dropped, " if repeats else ""
            notes.append(f"{name}: taken as a set ({said}sorted; fields.{name} is compare: set)")
            fixed[name] = taken
    return (fixed, notes) if notes else (answer, [])


def feedback_message(reason: str) -> str:
    return (
        f"A previous answer to this request was rejected: {reason}. "
        "Answer again as one JSON object that follows the schema exactly."
    )
