"""The generate node's vote between draws (`samples`, `agree`, `agree_on`): draws are
grouped by their values on the agreed fields, compared by the manifest's `fields:` rules;
`decided` says when the draws still to come cannot change the vote (docs/pack-format.md,
"Quorum draws")."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from runtime.backends.base import TokenLogprob
from runtime.nodes.base import LoadContext, Outcome

if TYPE_CHECKING:
    from runtime.pack.fields import FieldRule
    from runtime.pack.model import Node


def vote(node: Node, fields: Mapping[str, FieldRule], draws: list[Outcome]) -> list[list[int]]:
    """Draws grouped by their values on the agreed fields (`agree_on`, else every write),
    each field compared by its `fields:` rule: a draw joins the first group whose first
    draw it equals on every agreed field. Other fields (a quote, a reason) may differ."""
    # Imported here: runtime.pack's package imports the loader, which imports this module.
    from runtime.pack.fields import matches, rule_for

    groups: list[list[int]] = []
    for i, draw in enumerate(draws):
        for members in groups:
            first = draws[members[0]].writes
            if all(
                matches(rule_for(fields, f), first.get(f), draw.writes.get(f)) for f in node.agree_on or node.writes
            ):
                members.append(i)
                break
        else:
            groups.append([i])
    return groups


def decided(groups: list[list[int]], left: int, agree: int) -> bool:
    """Whether the draws still to come (`left` of them) can no longer change the vote.

    Settled: the largest group has `agree` draws and is larger than any other group (or a
    new one) could grow with every remaining draw, so it stays the unique largest and its
    first draw is committed as if every draw were made. Held: no group, old or new, can
    reach `agree` any more, so the node is unsure whatever comes. With no valid draw yet
    the outcome could still be a failure (every draw rejected), so the draws go on."""
    if not groups:
        return False
    sizes = sorted((len(g) for g in groups), reverse=True)
    best, others = sizes[0], sizes[1:]
    if best >= agree and left < best and all(size + left < best for size in others):
        return True
    return left < agree and all(size + left < agree for size in sizes)


def least_p(logprobs: list[TokenLogprob] | None, fixed: str = "") -> float | None:
    """The probability of the least likely token of an answer, leaving out the tokens that
    lie wholly inside `fixed`, the opening every answer to the schema starts with (`{"` and
    the first name: the grammar leaves no choice there, and an endpoint with `prefill`
    does not decode it at all); None without logprobs."""
    if not logprobs:
        return None
    skip = len(fixed) if "".join(t.token for t in logprobs).startswith(fixed) else 0
    end, chosen = 0, []
    for token in logprobs:
        end += len(token.token)
        if end > skip:  # a token that runs past the opening is the model's choice
            chosen.append(token.logprob)
    return math.exp(min(chosen)) if chosen else 1.0


def load_sure(node: Node, spec: dict[str, Any], loader: LoadContext, at: tuple[str, ...]) -> float | None:
    """`sure: P`: a quorum's first draw settles the node alone when every token of it had
    probability P or more (from the endpoint's logprobs); docs/pack-format.md, "Quorum draws"."""
    value = spec["sure"]
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value <= 1:
        loader.error("sure must be a probability above 0 and at most 1", *at, "sure")
        return None
    if node.samples < 2:
        loader.error(
            f"node '{node.id}': sure needs samples of 2 or more (it lets the first draw stand alone)", *at, "sure"
        )
    elif node.draw_all:
        loader.error(
            f"node '{node.id}': sure stops the draws after the first; draw_all makes every one: use one", *at, "sure"
        )
    elif "confidence" in spec:
        loader.error(
            f"node '{node.id}': sure stops the draws after the first; a confidence gate measures every draw: use one",
            *at,
            "sure",
        )
    elif "prior" in spec:
        loader.error(
            f"node '{node.id}': sure reads how likely the written answer was; a prior may commit another: use one",
            *at,
            "sure",
        )
    return float(value)


def load_agree_on(node: Node, spec: dict[str, Any], loader: LoadContext, at: tuple[str, ...]) -> tuple[str, ...] | None:
    value = spec.get("agree_on")
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        loader.error("agree_on must be a non-empty list of fields the node writes", *at, "agree_on")
        return None
    for name in value:
        if name not in node.writes:
            loader.error(
                f"node '{node.id}': agree_on names '{name}', which the node does not write; writes: "
                + ", ".join(node.writes),
                *at,
                "agree_on",
                kind="reference",
            )
    if node.samples < 2:
        loader.error(f"node '{node.id}': agree_on needs samples of 2 or more (draws to compare)", *at, "agree_on")
    return tuple(value)
