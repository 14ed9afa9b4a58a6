"""`generate`: one schema-constrained model answer, verified before commit.

The ladder: sample; re-sample (`resamples` times); re-sample told what was wrong
(`feedback` times; the description, never the rejected text); then fail, which takes
on_fail. With a run-wide `budget`, retries draw on the budget instead. With
`samples: N`, N draws are made, each with the ladder above; a draw whose ladder ends
rejected is left out (it does not fail the node), and `agree` of the valid draws must
agree on the written fields (or those `agree_on` names, compared by the manifest's
`fields:` rules), or the node is unsure and takes on_unsure; it fails only when every
draw was rejected. Draws stop once those still to come cannot change the vote (not with
a `confidence` gate, nor with `draw_all: true`; docs/pack-format.md, "Quorum draws");
with `sure: P`, a first draw whose every token had probability P or more (its call asks
for logprobs) stands alone; with `sure_fields: true` too, the later draws ask only for
the fields the first draw was not sure of (runtime.nodes.sure_fields).
With `confidence: {field, min}` (or `{fields, min}`), the node's calls ask for logprobs
and the node is also unsure when its confidence in that field (the least sure of those
fields) is below `min` (runtime.confidence); the confidence is on the step either way. With `prior: {field,
values}`, the calls ask for logprobs too and a verified answer's closed-choice value is
corrected for the model's label bias (runtime.prior). A request that does not fit the
model's context is asked again with one few-shot example fewer (the farthest from the
request first) until it fits or none is left; then the node fails."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from runtime.backends._grammar import opening as answer_opening
from runtime.choices import NoChoices, call_schema
from runtime.errors import ContextOverflow, OutputRejected
from runtime.messages import build_messages, context_problem
from runtime.nodes.base import LoadContext, NodeDrawing, Outcome, RunContext, covered, may_retry, whole_number
from runtime.nodes.gating import apply_gate, load_gate, measure
from runtime.nodes.generate_keys import load_choices, load_continues, load_examples
from runtime.nodes.sure_fields import PartialAsk, field_least_p, partial_ask
from runtime.nodes.voting import decided, least_p, load_agree_on, load_sure, vote
from runtime.prior import apply_prior, load_prior
from runtime.verify import as_sets, feedback_message, parse_answer, verify_answer

if TYPE_CHECKING:
    from runtime.pack.model import Node, Pack

THINK = "Before answering, think step by step about the request above. Do not give the final JSON yet."
ANSWER = "Now give the final answer as one JSON object that follows the schema."


def has_examples(messages: list[dict[str, str]]) -> bool:
    """Whether `messages` (runtime.messages: system, then a user/assistant pair per
    few-shot example, then the request) still holds an example pair."""
    return len(messages) >= 4 and messages[1]["role"] == "user" and messages[2]["role"] == "assistant"


def first_call(
    node: Node, pack: Pack, state: dict[str, Any], input: dict[str, Any]
) -> tuple[list[dict[str, str]], dict[str, Any] | None, bool] | None:
    """The messages, schema and logprobs flag of the first call `node` makes in this
    state, as GenerateKind.run makes it (runtime.lookahead sends it ahead); None for a
    node whose first call is not its answer (two_stage) or that would not call (no choices)."""
    if node.two_stage:
        return None
    try:
        schema, _ = call_schema(node.schema, node.validator, node.choices, {**state, "input": input})
    except NoChoices:
        return None
    messages = build_messages(pack, node, state, input).messages
    return messages, schema, wants_logprobs(node, first=True)


def wants_logprobs(node: Node, *, first: bool) -> bool:
    """Whether a call of `node` asks for logprobs: a confidence gate and a prior read
    them from every answer, a quorum's `sure` from its first draw's."""
    return node.confidence is not None or node.prior is not None or (first and node.sure is not None)


class GenerateKind:
    name = "generate"
    keys = frozenset(
        {
            "assert",
            "two_stage",
            "samples",
            "agree",
            "max_tokens",
            "temperature",
            "retry",
            "choices",
            "examples",
            "system",
            "confidence",
            "agree_on",
            "prior",
            "draw_all",
            "continues",
            "sure",
            "sure_fields",
        }
    )
    drawing = NodeDrawing(shape="rounded", css_class="node-generate", label="generate", mermaid=('["', '"]'))
    terminal = False
    can_fail = True
    waits = False
    asks_model = True

    def load(self, node: Node, spec: dict[str, Any], loader: LoadContext) -> None:
        at = ("nodes", node.id)
        node.prompt = loader.prompt(node, required=True)
        node.schema, node.validator = loader.schema(node.id, required=True)
        if not node.writes:
            loader.error(f"generate node '{node.id}' must declare 'writes', the fields its answer fills", *at)
        props = (node.schema or {}).get("properties", {})
        for w in node.writes:
            if node.schema is not None and w not in props:
                loader.error(
                    f"node '{node.id}' writes '{w}', but grammars/{node.id}.json has no such property", *at, "writes"
                )
        if "assert" in spec:
            node.check = loader.expr(spec["assert"], *at, "assert")
            if node.check is not None:
                for ref in sorted(node.check.references):
                    if not covered(ref, node.reads + node.writes):
                        loader.error(
                            f"node '{node.id}': assert uses '{ref}', which is neither read nor written", *at, "assert"
                        )
        node.two_stage = _flag(spec, "two_stage", loader, at)
        node.samples = whole_number(spec, "samples", 1, 1, 15, loader, at)
        node.agree = whole_number(spec, "agree", node.samples // 2 + 1, 1, node.samples, loader, at)
        node.agree_on = load_agree_on(node, spec, loader, at)
        node.draw_all = _flag(spec, "draw_all", loader, at)
        if "sure" in spec:
            node.sure = load_sure(node, spec, loader, at)
        node.sure_fields = _flag(spec, "sure_fields", loader, at)
        if node.sure_fields and "sure" not in spec:
            loader.error(
                f"node '{node.id}': sure_fields judges `sure` field by field; give sure: P", *at, "sure_fields"
            )
        node.max_tokens = whole_number(spec, "max_tokens", 256, 1, 32768, loader, at)
        temperature = spec.get("temperature", 0.7 if node.samples > 1 else 0.0)
        if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or not 0 <= temperature <= 2:
            loader.error("temperature must be a number from 0 to 2", *at, "temperature")
        else:
            node.temperature = float(temperature)
        node.retry = loader.retry(spec.get("retry"), *at, "retry")
        if "confidence" in spec:
            node.confidence = load_gate(node, spec, loader, at)
        node.choices = load_choices(node, spec.get("choices"), loader)
        if node.prompt is not None:
            node.examples = load_examples(node, spec.get("examples"), loader)
        if "prior" in spec:
            node.prior = load_prior(node, spec, loader, at)
        if "system" in spec:
            node.system = loader.template(spec["system"], node.reads, *at, "system")
        if "continues" in spec:
            node.continues = load_continues(node, spec, loader)

    def run(self, node: Node, walk: RunContext) -> Outcome:
        built = build_messages(walk.pack, node, walk.state, walk.input)
        try:
            # With `choices`, this call's schema (grammar and verification) has the enums
            # allowed in the current state; a copy of the node carries it.
            schema, validator = call_schema(node.schema, node.validator, node.choices, walk.view())
        except NoChoices as exc:
            return Outcome("fail", reason=str(exc), prompt=built.prompt, notes=built.notes)
        if schema is not node.schema:
            node = dataclasses.replace(node, schema=schema, validator=validator)
        outcome = self._draw(node, walk, built.messages, built.prompt)
        outcome.notes = [*built.notes, *outcome.notes]
        return outcome

    def _draw(self, node: Node, walk: RunContext, messages: list[dict[str, str]], prompt: str) -> Outcome:
        if node.samples == 1:
            outcome = self._ladder(node, walk, messages)
            outcome.prompt = prompt
            return apply_gate(node, outcome, [outcome], walk.pack.fields)
        draws: list[Outcome] = []
        rejected: list[Outcome] = []
        ask: PartialAsk | None = None  # with sure_fields: what the draws after the first ask for
        for made in range(1, node.samples + 1):
            draw = self._ladder(node, walk, messages, first=made == 1, ask=ask)
            if made == 1 and draw.status == "ok" and node.sure is not None:
                ask = draw.partial
                why = _stands_alone(node.sure, draw)
                if why:
                    settled = Outcome(
                        "ok",
                        writes=draw.writes,
                        attempt=draw.attempt,
                        prompt=prompt,
                        prior=draw.prior,
                        notes=[*draw.notes, f"settled by its first draw: {why} (sure: {node.sure:g})"],
                    )
                    return apply_gate(node, settled, [draw], walk.pack.fields)
            if draw.status == "ok":
                draws.append(draw)
            elif draw.context:  # the request does not fit: no other draw can do better
                draw.prompt = prompt
                return draw
            else:
                rejected.append(draw)  # its ladder spent; the vote is among the valid draws
            left = node.samples - made
            # A `confidence` gate may measure the share of agreeing draws: every draw is made.
            stop_early = not node.draw_all and node.confidence is None
            if left and stop_early and decided(vote(node, walk.pack.fields, draws), left, node.agree):
                break  # the draws to come cannot change the vote: they are not made
        made_all = len(draws) + len(rejected) == node.samples
        stopped = "" if made_all else f"; stopped after {len(draws) + len(rejected)} of {node.samples} draws"
        if not draws:
            last = rejected[-1]
            return Outcome("fail", reason=f"all {node.samples} draws were rejected; last: {last.reason}", prompt=prompt)
        groups = vote(node, walk.pack.fields, draws)
        best = max(groups, key=len)  # the first of the largest groups
        partly = [ask.note(node.sure)] if ask is not None and node.sure is not None else []
        if len(best) < node.agree:
            tally = ", ".join(str(len(g)) for g in sorted(groups, key=len, reverse=True))
            dropped = f" valid; {len(rejected)} rejected" if rejected else ""
            return apply_gate(
                node,
                Outcome(
                    "unsure",
                    reason=f"draws disagreed ({tally} of {len(draws)}{dropped}; need {node.agree}{stopped})",
                    prompt=prompt,
                    notes=partly,
                ),
                draws,
                walk.pack.fields,
            )
        chosen = draws[best[0]]
        return apply_gate(
            node,
            Outcome(
                "ok",
                writes=chosen.writes,
                attempt=chosen.attempt,
                prompt=prompt,
                prior=chosen.prior,
                notes=[*chosen.notes, *partly, *([f"the vote was decided{stopped}"] if stopped else [])],
            ),
            draws,
            walk.pack.fields,
        )

    def _ladder(
        self,
        node: Node,
        walk: RunContext,
        messages: list[dict[str, str]],
        *,
        first: bool = True,
        ask: PartialAsk | None = None,
    ) -> Outcome:
        policy = walk.pack.retry_for(node)
        given = dict(ask.settled) if ask is not None else None  # on each attempt of this draw
        tries = 0
        reason = ""
        while True:
            tries += 1
            stage = "sample" if tries == 1 else ("resample" if tries <= 1 + policy.resamples else "feedback")
            asked = messages + ([{"role": "user", "content": feedback_message(reason)}] if stage == "feedback" else [])
            try:
                if node.two_stage:
                    thought, attempt = walk.ask(
                        node, [*asked, {"role": "user", "content": THINK}], None, stage, "reasoning"
                    )
                    walk.record(node, thought, attempt, "reasoning", ok=True)
                    # The reasoning conditions this answer only; it never enters state or a later prompt.
                    asked = [
                        *asked,
                        {"role": "assistant", "content": thought.text},
                        {"role": "user", "content": ANSWER},
                    ]
                # The schema (grammar) sent for this call: with `choices`, this state's enums;
                # after a first draw sure of some fields (`sure_fields`), the others only.
                schema = ask.schema if ask is not None else node.schema
                # A quorum's `sure` reads the first draw's first call only: not a retry of it.
                opening = first and tries == 1
                reply, attempt = walk.ask(
                    node, asked, schema, stage, logprobs=wants_logprobs(node, first=opening), given=given
                )
            except ContextOverflow as exc:
                if has_examples(messages):
                    # Cut examples first: drop the one farthest from the request (for `nearest`, the
                    # least similar) and ask again; this is not a try of the ladder.
                    messages = [messages[0], *messages[3:]]
                    tries -= 1
                    continue
                # The same request cannot fit on a retry: a node failure (on_fail), not a backend error.
                return Outcome("fail", reason=context_problem(walk.pack, node, walk.input, exc), context=True)
            try:
                answer = parse_answer(reply.text, reply.finish_reason)
                if ask is not None:
                    answer = ask.complete(answer)
                written = answer  # as the model wrote it (a set field not yet sorted): what logprobs spell
                answer, set_notes = as_sets(node, walk.pack.fields, answer)
                if walk.verify:
                    writes = verify_answer(node, answer, walk.state, walk.input)
                else:
                    writes = {w: answer.get(w) for w in node.writes} if isinstance(answer, dict) else {}
            except OutputRejected as exc:
                walk.record(
                    node, reply, attempt, stage, ok=False, category=exc.category, reason=exc.reason, given=given
                )
                reason = exc.reason
                if walk.verify and may_retry(policy, tries, walk):
                    continue
                return Outcome("fail", reason=f"{exc.category}: {exc.reason} (after {tries} attempt(s))")
            walk.record(node, reply, attempt, stage, ok=True, given=given)
            outcome = Outcome("ok", writes=writes, attempt=attempt, notes=set_notes)
            if opening and node.sure is not None:
                outcome.least_p = least_p(reply.logprobs, answer_opening(schema) or "")
                least = field_least_p(reply.text, reply.logprobs) if node.sure_fields else None
                if least is not None:
                    outcome.partial = partial_ask(node.schema, answer, least, node.sure)
            if node.prior is not None:
                apply_prior(node, reply, answer, outcome, schema, walk.state, walk.input)
            if node.confidence is not None and outcome.confidence is None:
                measure(node, reply, outcome, schema, written)
            return outcome


def _stands_alone(sure: float, draw: Outcome) -> str:
    """Why a quorum's first draw settles the node alone under `sure`, or "" when it does not."""
    if draw.least_p is not None and draw.least_p >= sure:
        return f"its least likely token had p={draw.least_p:.3f}"
    if draw.partial is not None and not draw.partial.rest:
        return f"every token of each field's value had p >= {sure:g}"
    return ""


def _flag(spec: dict[str, Any], key: str, loader: LoadContext, at: tuple[str, ...]) -> bool:
    value = spec.get(key, False)
    if not isinstance(value, bool):
        loader.error(f"{key} must be true or false", *at, key)
        return False
    return value
