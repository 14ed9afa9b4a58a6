"""How sure the model was of a value it wrote, for a generate node's `confidence:` gate:
renormalised over the allowed values for a closed-choice field (an enum string, a
boolean, a label from a `choices` list), the model's own probability for an open one.

Two sources, best first:
- **logprobs**: the endpoint's per-token log probabilities. Servers (llama-server, vLLM,
  OpenAI with structured outputs) report each token's probability *before* the grammar
  masks the tokens it forbids, so the plain product of the value's token probabilities is
  the chance the model would have written the value unconstrained (1e-22 on a tiny model),
  and the runner-up token is often one the grammar forbids. The confidence is therefore
  renormalised over the values the grammar allows for the field (`allowed`: the enum of
  the schema sent for that call, true/false for a boolean, null when the type allows it;
  see `allowed_values`). At each token that spells part of the value (a token may carry
  structure too, e.g. `":"bill` or `ing",`), with Q the answer text before the token:
  the written token and every alternative in `top` whose text, appended to Q, still
  leads to some allowed value are the tokens the grammar allows there; each gets its
  share of their summed probability. An alternative's share goes to the value(s) it
  leads to (split evenly when it leads to several); the written token's share carries
  on to the next token, with the share of any alternative that leaves exactly the same
  values open (another spelling of the same step, e.g. ` ` instead of ` "`). Once only the chosen value is still open (the rest of the value,
  its closing quote, the `,` or `}` after it), the value is decided and later tokens count
  for nothing. An allowed value that no listed token leads to gets the most an
  unlisted token could have had (the least listed token's probability, or the written
  token's when decoding was greedy; together at most what the list leaves of 1), so a
  value is not trusted because its rivals went unlisted. p = the chosen value's total; the runner-up is the other allowed value
  with the largest total; margin = p - runner-up. The totals over all values sum to 1
  (over the alternatives the server listed: ask for many, TOP_LOGPROBS in the openai
  backend). Without an allowed set (`allowed` None: an open field, free text or a
  number) the plain product of the tokens that spell the value is returned, `basis`
  "raw": the grammar leaves such a value too many spellings to renormalise over; a gate
  needs a ranking of answers, which the product gives (benchmarks/one_call_gated.py
  measures how well on extraction).
- **agreement**: without logprobs, when the node draws `samples` > 1 times, p = the
  share of draws whose value is the chosen one, margin = p minus the next value's share.
With neither, there is no confidence (source "none", p None) and the gate cannot hold
the node; the trace says so. Reference: docs/pack-format.md (`confidence`)."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from runtime.backends.base import TokenLogprob

__all__ = [
    "Confidence",
    "ConfidenceGate",
    "LabelPrior",
    "agreement_confidence",
    "allowed_values",
    "value_confidence",
    "value_shares",
    "value_span",
]

SOURCES = ("logprobs", "agreement", "none")


@dataclass(frozen=True)
class ConfidenceGate:
    """A generate node's `confidence: {field: NAME, min: P}` (or `{fields: [NAME, ...],
    min: P}`): below `min` on its least sure field, the node is unsure (on_unsure, else
    on_fail)."""

    field: str  # the first gated field (the only one with `field:`)
    min: float
    also: tuple[str, ...] = ()  # with `fields:`, the gated fields after the first

    @property
    def fields(self) -> tuple[str, ...]:
        return (self.field, *self.also)


@dataclass(frozen=True)
class LabelPrior:
    """A generate node's `prior: {field: NAME, values: {LABEL: P}}`: each label's share
    of the model's answers on a content-free input (labels as the field's values; runtime.prior)."""

    field: str
    values: tuple[tuple[Any, float], ...]

    def of(self, label: Any) -> float:
        """The prior of `label`; the smallest listed one when it is not listed."""
        for known, p in self.values:
            if _same(known, label):
                return p
        return min(p for _, p in self.values)


@dataclass
class Confidence:
    field: str
    value: Any
    p: float | None  # None: no source could say (source "none")
    margin: float | None
    source: str  # one of SOURCES
    # How a logprobs confidence was computed: "grammar" (renormalised over the allowed
    # values), "raw" (the model's unconstrained probability: no allowed set was known),
    # "prior" (each allowed value's share divided by a label prior, renormalised: runtime.prior).
    basis: str | None = None
    runner_up: Any = None  # the allowed value with the next highest probability, if any had some
    alternatives_seen: int | None = None  # allowed alternative tokens found in the servers' `top` lists
    values_unlisted: int | None = None  # allowed values given the most an unlisted token could have

    def to_dict(self) -> dict[str, Any]:
        """As a dict; the logprobs-only keys (basis, runner_up, alternatives_seen,
        values_unlisted) only where they are set."""
        out = asdict(self)
        for key in ("basis", "runner_up", "alternatives_seen", "values_unlisted"):
            if out[key] is None:
                del out[key]
        return out


_WHITESPACE = " \t\n\r"


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WHITESPACE:
        i += 1
    return i


def _raw_span(text: str, field: str) -> tuple[int, int, Any] | None:
    """Where the value of the top-level key `field` is written in the JSON object in
    `text` (the first `{` on): (start, end, value), a string's quotes included. The last
    occurrence of a repeated key wins, as json.loads decides. None when the text holds no
    such object or key."""
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
            found = (i, end, value)
        i = _skip(text, end)
        if text[i : i + 1] == ",":
            i = _skip(text, i + 1)
            continue
        return found if text[i : i + 1] == "}" else None
    return None


def value_span(text: str, field: str) -> tuple[int, int, Any] | None:
    """Like `_raw_span`, but the span of a string value is without its quotes."""
    found = _raw_span(text, field)
    if found is None:
        return None
    start, end, value = found
    return (start + 1, end - 1, value) if text[start] == '"' else found


def allowed_values(prop: Any) -> list[Any] | None:
    """The values a schema property allows, when it is a closed choice: its `enum` (or
    `const`), true and false for a boolean, plus null where the type allows null;
    `anyOf`/`oneOf` of closed choices is their union. None for an open field."""
    if not isinstance(prop, dict):
        return None
    if "enum" in prop and isinstance(prop["enum"], list):
        return list(prop["enum"])
    if "const" in prop:
        return [prop["const"]]
    for key in ("anyOf", "oneOf"):
        branches = prop.get(key)
        if isinstance(branches, list) and branches:
            union: list[Any] = []
            for branch in branches:
                some = allowed_values(branch)
                if some is None:
                    return None
                union += [v for v in some if not any(_same(v, u) for u in union)]
            return union
    kinds = prop.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds if isinstance(kinds, list) else []
    if set(kinds) == {"boolean"}:
        return [True, False]
    if set(kinds) == {"boolean", "null"}:
        return [True, False, None]
    if set(kinds) == {"null"}:
        return [None]
    return None


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _locate(text: str, logprobs: Sequence[TokenLogprob] | None, field: str, value: Any) -> tuple[str, int, int] | None:
    """The tokens' joined text and where `field`'s value (quotes included) lies in it;
    None when there are no tokens, or they do not spell an answer whose `field` is `value`."""
    if not logprobs:
        return None
    joined = "".join(t.token for t in logprobs)
    # The tokens normally spell the answer exactly; a server may add tokens around it
    # (a reasoning preamble), so find the answer inside them, else read them alone.
    offset = 0 if joined == text else joined.find(text) if text else -1
    span = _raw_span(text, field) if offset >= 0 else _raw_span(joined, field)
    if span is None or not _same(span[2], value):
        return None
    return joined, span[0] + max(offset, 0), span[1] + max(offset, 0)


def value_confidence(
    text: str,
    logprobs: Sequence[TokenLogprob] | None,
    field: str,
    value: Any,
    allowed: Sequence[Any] | None = None,
    greedy: bool = False,
) -> Confidence | None:
    """The logprob confidence of `field` = `value` in the answer `text`, renormalised over
    the `allowed` values (the field's closed choice in the schema sent for this call; see
    the module docstring). None when there are no logprobs, or the tokens do not spell an
    answer whose `field` is `value`. `greedy`: the answer was decoded at temperature 0, so
    every token the grammar allowed was at most as likely as the one written."""
    found = _locate(text, logprobs, field, value)
    if found is None or not logprobs:
        return None
    joined, start, end = found
    if not allowed:
        return _raw_confidence(logprobs, field, value, start, end)
    shares, seen, unseen = _grammar_shares(joined, logprobs, value, start, end, allowed, greedy)
    p = shares[0][1]
    runner_up = max(shares[1:], key=lambda share: share[1], default=None)
    second = runner_up[1] if runner_up is not None else 0.0
    return Confidence(
        field,
        value,
        p,
        p - second,
        "logprobs",
        basis="grammar",
        runner_up=runner_up[0] if runner_up is not None and second > 0 else None,
        alternatives_seen=seen,
        values_unlisted=unseen,
    )


def value_shares(
    text: str,
    logprobs: Sequence[TokenLogprob] | None,
    field: str,
    value: Any,
    allowed: Sequence[Any],
    greedy: bool = False,
) -> list[tuple[Any, float]] | None:
    """Every allowed value's probability, as value_confidence estimates it from the
    answer's tokens (the chosen value first; they sum to 1). None as value_confidence."""
    found = _locate(text, logprobs, field, value)
    if found is None or not logprobs:
        return None
    joined, start, end = found
    return _grammar_shares(joined, logprobs, value, start, end, allowed, greedy)[0]


def _raw_confidence(
    logprobs: Sequence[TokenLogprob], field: str, value: Any, start: int, end: int
) -> Confidence | None:
    """The model's own probability of the value (no allowed set to renormalise over):
    the product over the tokens that spell it; margin over the first token's best other."""
    if end - start >= 2 and isinstance(value, str):
        start, end = start + 1, end - 1  # the letters, not the quotes
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
    return Confidence(field, value, p, p - runner_up, "logprobs", basis="raw")


_AFTER_VALUE = ",}]"


def _leads_to(candidate: str, target: str) -> bool:
    """Whether answer text `candidate` can still become, or already holds, the value
    written as `target` (the text before the value + the value's JSON): one is a prefix
    of the other, or `candidate` goes on past the value with structure only."""
    if target.startswith(candidate):
        return True
    if not candidate.startswith(target):
        return False
    rest = candidate[len(target) :].lstrip(_WHITESPACE)
    return not rest or rest[0] in _AFTER_VALUE


def _grammar_shares(
    joined: str,
    logprobs: Sequence[TokenLogprob],
    value: Any,
    start: int,
    end: int,
    allowed: Sequence[Any],
    greedy: bool = False,
) -> tuple[list[tuple[Any, float]], int, int]:
    """(value, probability) for the chosen value (first) and every other allowed value;
    how many allowed alternative tokens the `top` lists held; and how many times an
    allowed value no listed token led to was given the most it could have had (module
    docstring)."""
    before = joined[:start]
    written = joined[start:end]
    # Each allowed value as the grammar writes it (the chosen one as it was written).
    targets: list[tuple[Any, str]] = [(value, before + written)]
    for v in allowed:
        if not _same(v, value) and not any(_same(v, t) for t, _ in targets):
            targets.append((v, before + json.dumps(v, ensure_ascii=False)))
    totals = [0.0] * len(targets)  # the probability of each value; [0] is the chosen one
    carried = 1.0  # the share of the path the written tokens took, still undecided
    seen = unseen = 0
    at = 0
    for token in logprobs:
        after = at + len(token.token)
        if at >= end:
            break
        if after > start:
            prefix = joined[:at]
            open_ = [i for i, (_, target) in enumerate(targets) if _leads_to(prefix, target)]
            if open_ == [0]:
                break  # only the chosen value is still possible: it is decided
            ways = [i for i in open_ if _leads_to(prefix + token.token, targets[i][1])]
            # (logprob, the values it leads to, whether it goes the written token's way)
            masses: list[tuple[float, list[int], bool]] = [(token.logprob, ways, True)]
            listed = {token.token}
            for alt, logprob in token.top:
                if alt in listed:
                    continue
                listed.add(alt)
                leads = [i for i in open_ if _leads_to(prefix + alt, targets[i][1])]
                if leads:
                    # An alternative that leaves the same values open as the written token
                    # (` ` for ` "` before a value) is another spelling of the same step.
                    masses.append((logprob, leads, leads == ways))
            seen += len(masses) - 1
            # An allowed value that no listed token leads to may still have had some
            # probability: at most what the least likely listed token had, and all of
            # them together at most what the list leaves of 1. Give them that (a gate
            # should not be sure of a value because its rivals went unlisted).
            reached = {i for _, leads, _ in masses for i in leads}
            unreached = [i for i in open_ if i not in reached]
            if unreached:
                probs = {tok: math.exp(lp) for tok, lp in token.top}
                probs[token.token] = math.exp(token.logprob)
                least = min((math.exp(lp) for _, lp in token.top), default=1.0)
                if greedy:  # decoding took the likeliest allowed token: the written one
                    least = min(least, probs[token.token])
                room = max(0.0, 1.0 - sum(probs.values()))
                each = min(least, room / len(unreached))
                if each > 0:
                    masses += [(math.log(each), [i], False) for i in unreached]
                    unseen += len(unreached)
            top = max(lp for lp, _, _ in masses)
            weights = [math.exp(lp - top) if top > -math.inf else 1.0 for lp, _, _ in masses]
            total = sum(weights)
            along = 0.0
            for weight, (_, leads, same) in zip(weights, masses, strict=True):
                if same:
                    along += weight
                    continue
                for i in leads:  # its share goes to the values it leads to, evenly
                    totals[i] += carried * weight / total / len(leads)
            carried *= along / total
        at = after
    totals[0] += carried
    return [(v, total) for (v, _), total in zip(targets, totals, strict=True)], seen, unseen


def agreement_confidence(
    field: str, values: Sequence[Any], value: Any, key: Callable[[Any], Hashable] | None = None
) -> Confidence:
    """The share of draws whose `field` is `value` (source "agreement"); margin is that
    share minus the share of the most common other value. `key`: what makes two values
    the same (the field's `fields:` rule); default exact JSON equality."""
    same_as = key or (lambda v: json.dumps(v, sort_keys=True))
    counts = Counter(same_as(v) for v in values)
    mine = same_as(value)
    total = max(1, len(values))
    p = counts[mine] / total
    runner_up = max((c for k, c in counts.items() if k != mine), default=0) / total
    return Confidence(field, value, p, p - runner_up, "agreement")


def no_confidence(field: str, value: Any) -> Confidence:
    """Neither logprobs nor draws to count: the gate cannot hold the node."""
    return Confidence(field, value, None, None, "none")
