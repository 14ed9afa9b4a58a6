"""`sure_fields: true` on a quorum with `sure: P`: `sure` judged field by field.

A field of the first draw's answer whose value tokens all had probability P or more is
*settled* by that draw. When every field is, the first draw stands alone (as with plain
`sure`); otherwise the later draws ask the model for the unsettled fields only (the
same messages, so the server reads the prompt from its cache, and a grammar of those
fields, so it decodes only them), and each later draw is the settled values plus its own
before it is verified and voted on (docs/pack-format.md, "Quorum draws")."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

# Top-level schema keywords that tie properties together: a grammar of some properties
# could not express them, so a node whose schema has one always draws whole answers.
_CROSS_FIELD = frozenset(
    {
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "dependentRequired",
        "dependentSchemas",
        "dependencies",
        "minProperties",
        "maxProperties",
        "patternProperties",
        "propertyNames",
        "unevaluatedProperties",
    }
)


class Token(Protocol):
    token: str
    logprob: float


@dataclass(frozen=True)
class PartialAsk:
    """What the draws after the first ask for: `schema` (the grammar sent) holds the
    unsettled fields only; `settled` are the first draw's values of the others."""

    schema: dict[str, Any]
    settled: dict[str, Any]
    rest: tuple[str, ...]

    def complete(self, answer: Any) -> Any:
        """A later draw's answer with the settled values: they stand even where the draw
        wrote the field anyway (an endpoint that sends no grammar)."""
        if not isinstance(answer, dict):
            return answer
        return {**answer, **self.settled}

    def note(self, p: float) -> str:
        return (
            f"later draws ask for {', '.join(self.rest)} only: {', '.join(self.settled)} settled by the first "
            f"draw (every token of each had p >= {p:g})"
        )


def value_spans(text: str) -> dict[str, tuple[int, int]] | None:
    """Where each top-level value of the JSON object `text` starts and ends (character
    offsets); None when `text` is not one JSON object."""
    decoder = json.JSONDecoder()
    spans: dict[str, tuple[int, int]] = {}

    def skip(i: int) -> int:
        while i < len(text) and text[i] in " \t\r\n":
            i += 1
        return i

    try:
        i = skip(0)
        if text[i] != "{":
            return None
        i = skip(i + 1)
        while text[i] != "}":
            key, i = decoder.raw_decode(text, i)
            i = skip(i)
            if text[i] != ":" or not isinstance(key, str):
                return None
            start = skip(i + 1)
            _, end = decoder.raw_decode(text, start)
            spans[key] = (start, end)
            i = skip(end)
            if text[i] == ",":
                i = skip(i + 1)
            elif text[i] != "}":
                return None
    except (IndexError, json.JSONDecodeError, RecursionError):
        return None
    return spans if not text[i + 1 :].strip() else None


def field_least_p(text: str, tokens: Sequence[Token] | None) -> dict[str, float] | None:
    """For each top-level field of the answer `text`, the probability of the least likely
    token that overlaps its value. None without logprobs, when the tokens do not spell
    `text` (a character split across tokens) or `text` is not one JSON object."""
    if not tokens or "".join(t.token for t in tokens) != text:
        return None
    spans = value_spans(text)
    if spans is None:
        return None
    least = dict.fromkeys(spans, 1.0)
    at = 0
    for t in tokens:
        start, at = at, at + len(t.token)
        for name, (a, b) in spans.items():
            if start < b and at > a:
                least[name] = min(least[name], math.exp(t.logprob))
    return least


def partial_ask(schema: dict[str, Any] | None, answer: Any, least: dict[str, float], sure: float) -> PartialAsk | None:
    """The later draws' ask after a first draw with per-field probabilities `least`;
    None when no field is settled or the schema ties its fields together. `rest` is
    empty when every field the first draw wrote is settled: it stands alone."""
    if not isinstance(schema, dict) or not isinstance(answer, dict) or _CROSS_FIELD & schema.keys():
        return None
    props = schema.get("properties")
    if not isinstance(props, dict):
        return None
    settled = {name: answer[name] for name in props if name in answer and least.get(name, 0.0) >= sure}
    if not settled:
        return None
    # A property the first draw left out counts as settled once every field it wrote is:
    # the draw stands alone. Otherwise the later draws may write it.
    unsure = [name for name in props if name in answer and name not in settled]
    rest = tuple(name for name in props if name not in settled) if unsure else ()
    required = [name for name in schema.get("required", []) if name in rest]
    partial = {**schema, "properties": {name: props[name] for name in rest}, "required": required}
    if not required:
        partial.pop("required")
    return PartialAsk(partial, settled, rest)
