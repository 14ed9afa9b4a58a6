"""How sure the model was of a closed-choice value (an enum string, a boolean, a label
from a `choices` list), for a generate node's `confidence:` gate.

Two sources, best first:
- **logprobs**: the endpoint's per-token log probabilities. The tokens that spell the
  field's value in the answer are found by laying the token strings end to end over the
  answer text; p = exp(sum of those tokens' logprobs) (every token of the value, so p is
  the probability of the whole value, not just of its first token), and margin = p minus
  the probability of the best other token at the value's first token (from `top`; when
  `top` lists no other token, the most it could be: 1 - that token's probability).
  Servers report the model's own distribution, before a grammar masks it (llama-server
  does so): p is then how likely the model was to write this value unconstrained, a
  conservative figure, and the runner-up may be a token the grammar forbids.
- **agreement**: without logprobs, when the node draws `samples` > 1 times, p = the
  share of draws whose value is the chosen one, margin = p minus the next value's share.
With neither, there is no confidence (source "none", p None) and the gate cannot hold
the node; the trace says so. Reference: docs/pack-format.md (`confidence`)."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from runtime.backends.base import TokenLogprob

__all__ = ["Confidence", "ConfidenceGate", "agreement_confidence", "value_confidence", "value_span"]

SOURCES = ("logprobs", "agreement", "none")


@dataclass(frozen=True)
class ConfidenceGate:
    """A generate node's `confidence: {field: NAME, min: P}`: below `min` on `field`,
    the node is unsure (on_unsure, else on_fail)."""

    field: str
    min: float


@dataclass
class Confidence:
    field: str
    value: Any
    p: float | None  # None: no source could say (source "none")
    margin: float | None
    source: str  # one of SOURCES

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_WHITESPACE = " \t\n\r"


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WHITESPACE:
        i += 1
    return i


def value_span(text: str, field: str) -> tuple[int, int, Any] | None:
    """Where the value of the top-level key `field` is written in the JSON object in
    `text` (the first `{` on): (start, end, value), the span without a string's quotes.
    The last occurrence of a repeated key wins, as json.loads decides. None when the text
    holds no such object or key."""
    i = text.find("{")
    if i < 0:
        return None
    decoder = json.JSONDecoder()
    found: tuple[int, int, Any] | None = None
    i = _skip(text, i + 1)
    if text[i : i + 1] == "}":
        return None
    while i < len(text):
        if text[i] != '"':
            return None
        try:
            key, i = decoder.raw_decode(text, i)
            i = _skip(text, i)
            if text[i : i + 1] != ":":
                return None
            i = _skip(text, i + 1)
            value, end = decoder.raw_decode(text, i)
        except (ValueError, IndexError):
            return None
        if key == field:
            found = (i + 1, end - 1, value) if text[i] == '"' else (i, end, value)
        i = _skip(text, end)
        if text[i : i + 1] == ",":
            i = _skip(text, i + 1)
            continue
        return found if text[i : i + 1] == "}" else None
    return None


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def value_confidence(text: str, logprobs: Sequence[TokenLogprob] | None, field: str, value: Any) -> Confidence | None:
    """The logprob confidence of `field` = `value` in the answer `text`. None when there
    are no logprobs, or the tokens do not spell an answer whose `field` is `value`."""
    if not logprobs:
        return None
    joined = "".join(t.token for t in logprobs)
    # The tokens normally spell the answer exactly; a server may add tokens around it
    # (a reasoning preamble), so find the answer inside them, else read them alone.
    offset = 0 if joined == text else joined.find(text) if text else -1
    span = value_span(text, field) if offset >= 0 else value_span(joined, field)
    if span is None or not _same(span[2], value):
        return None
    start, end = span[0] + max(offset, 0), span[1] + max(offset, 0)
    chosen: list[TokenLogprob] = []
    at = 0
    for token in logprobs:
        after = at + len(token.token)
        if after > start and at < end:
            chosen.append(token)
        at = after
    if not chosen:
        return None
    p = math.exp(sum(t.logprob for t in chosen))
    first = chosen[0]
    others = [logprob for tok, logprob in first.top if tok != first.token]
    runner_up = math.exp(max(others)) if others else max(0.0, 1.0 - math.exp(first.logprob))
    return Confidence(field, value, p, p - runner_up, "logprobs")


def agreement_confidence(field: str, values: Sequence[Any], value: Any) -> Confidence:
    """The share of draws whose `field` is `value` (source "agreement"); margin is that
    share minus the share of the most common other value."""
    counts = Counter(json.dumps(v, sort_keys=True) for v in values)
    mine = json.dumps(value, sort_keys=True)
    total = max(1, len(values))
    p = counts[mine] / total
    runner_up = max((c for k, c in counts.items() if k != mine), default=0) / total
    return Confidence(field, value, p, p - runner_up, "agreement")


def no_confidence(field: str, value: Any) -> Confidence:
    """Neither logprobs nor draws to count: the gate cannot hold the node."""
    return Confidence(field, value, None, None, "none")
