"""Confidence in a closed-choice value: from token logprobs, from agreement, and the
generate node's `confidence:` gate (through the scripted model's `$probs`)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from runtime import Trace, load_pack, open_backend, resume_run, run_pack
from runtime.backends.base import ModelCall, TokenLogprob
from runtime.backends.scripted import synthetic_logprobs
from runtime.confidence import agreement_confidence, allowed_values, value_confidence, value_span
from runtime.walker import RunOptions
from tests.support.runtime_packs import ENUM_SCHEMA, Recorder, issues_of, write_pack

GEN = {"kind": "generate", "reads": ["input.ticket"], "writes": ["category"]}
FLAG_SCHEMA = {
    "type": "object",
    "properties": {"urgent": {"type": "boolean"}, "note": {"type": "string"}},
    "required": ["urgent", "note"],
}


def tok(token: str, p: float, *top: tuple[str, float]) -> TokenLogprob:
    """A token at probability p, with alternatives given as probabilities too."""
    return TokenLogprob(token, math.log(p), [(token, math.log(p))] + [(t, math.log(q)) for t, q in top])


# -- the computation, on hand-made token lists ---------------------------------------------


def test_it_multiplies_the_probabilities_of_every_token_of_a_multi_token_value() -> None:
    tokens = [tok('{"category": "', 1.0), tok("bill", 0.6, ("tech", 0.3)), tok("ing", 0.9), tok('"}', 1.0)]
    found = value_confidence('{"category": "billing"}', tokens, "category", "billing")
    assert found is not None and found.source == "logprobs"
    assert found.p == pytest.approx(0.54)
    assert found.margin == pytest.approx(0.54 - 0.3)


def test_it_counts_tokens_that_carry_a_quote_with_part_of_the_value() -> None:
    # llama-server's tokens: ` "` before the value, `er"` closing it.
    tokens = [
        tok('{"word":', 1.0),
        tok(' "', 0.5),
        tok("am", 0.8, ("vi", 0.15)),
        tok("b", 0.9),
        tok('er"', 0.7),
        tok("}", 1.0),
    ]
    found = value_confidence('{"word": "amber"}', tokens, "word", "amber")
    assert found is not None
    assert found.p == pytest.approx(0.8 * 0.9 * 0.7)  # not the ` "` token: it spells no letter of the value
    assert found.margin == pytest.approx(0.8 * 0.9 * 0.7 - 0.15)


def test_it_takes_the_first_token_when_it_starts_with_the_opening_quote() -> None:
    tokens = [tok('{"word": ', 1.0), tok('"am', 0.4, ('"vi', 0.35)), tok('ber"}', 1.0)]
    found = value_confidence('{"word": "amber"}', tokens, "word", "amber")
    assert found is not None and found.p == pytest.approx(0.4) and found.margin == pytest.approx(0.05)


@pytest.mark.parametrize(
    "value, text", [(True, '{"urgent": true, "note": "x"}'), (False, '{"urgent":false,"note":"x"}')]
)
def test_it_measures_a_boolean(value: bool, text: str) -> None:
    start, end, found_value = value_span(text, "urgent") or (0, 0, None)
    assert text[start:end] == json.dumps(value) and found_value is value
    tokens = [tok(text[:start], 1.0), tok(text[start:end], 0.7, (json.dumps(not value), 0.2)), tok(text[end:], 0.5)]
    found = value_confidence(text, tokens, "urgent", value)
    assert found is not None and found.p == pytest.approx(0.7) and found.margin == pytest.approx(0.5)


def test_it_bounds_the_runner_up_when_the_server_lists_no_alternative() -> None:
    tokens = [TokenLogprob('{"category": "', 0.0), TokenLogprob("other", math.log(0.9)), TokenLogprob('"}', 0.0)]
    found = value_confidence('{"category": "other"}', tokens, "category", "other")
    assert found is not None and found.margin == pytest.approx(0.9 - 0.1)


def test_it_finds_the_answer_inside_tokens_that_spell_more_than_the_answer() -> None:
    tokens = [tok("Sure: ", 0.2), tok('{"category": "', 1.0), tok("other", 0.9), tok('"}', 1.0)]
    found = value_confidence('{"category": "other"}', tokens, "category", "other")
    assert found is not None and found.p == pytest.approx(0.9)


def test_it_reads_the_last_of_a_repeated_key_as_json_does() -> None:
    text = '{"category": "billing", "category": "other"}'
    start, end, value = value_span(text, "category") or (0, 0, None)
    assert value == json.loads(text)["category"] == "other" and text[start:end] == "other"


@pytest.mark.parametrize(
    "text, tokens, value",
    [
        ('{"category": "other"}', None, "other"),  # no logprobs
        ('{"category": "other"}', [], "other"),
        ('{"category": "other"}', [TokenLogprob('{"category": "other"}', 0.0)], "billing"),  # not the value committed
        ('{"note": "x"}', [TokenLogprob('{"note": "x"}', 0.0)], "x"),  # no such field
        ("not json", [TokenLogprob("not json", 0.0)], "other"),
    ],
)
def test_it_has_no_logprob_confidence_when_the_tokens_cannot_say(
    text: str, tokens: list[TokenLogprob] | None, value: Any
) -> None:
    assert value_confidence(text, tokens, "category", value) is None


# -- renormalised over the values the grammar allows -------------------------------------------

CATEGORIES = ["billing", "technical", "other"]


def test_it_renormalises_over_the_allowed_values_when_the_servers_alternatives_are_forbidden() -> None:
    # Pre-grammar probabilities: the model would rather write prose; the grammar forbids it.
    tokens = [
        tok('{"category": "', 1.0),
        tok("other", 1e-9, ("Once", 0.6), ("the", 0.3), ("tech", 3e-9), ("bill", 4e-9)),
        tok('"}', 0.2, ('",', 0.5), ("!", 0.1)),  # after the value: decided, counts for nothing
    ]
    found = value_confidence('{"category": "other"}', tokens, "category", "other", CATEGORIES)
    assert found is not None and (found.source, found.basis) == ("logprobs", "grammar")
    assert found.p == pytest.approx(1 / 8)
    assert found.runner_up == "billing" and found.margin == pytest.approx(1 / 8 - 1 / 2)
    assert (found.alternatives_seen, found.values_unlisted) == (2, 0)
    raw = value_confidence('{"category": "other"}', tokens, "category", "other")
    assert raw is not None and raw.basis == "raw"  # without the allowed values: the model's own, meaningless
    assert raw.p == pytest.approx(1e-9) and raw.margin == pytest.approx(1e-9 - 0.6)


def test_it_is_sure_when_the_grammar_allows_nothing_else_listed_and_nothing_could_hide() -> None:
    tokens = [tok('{"category": "', 1.0), tok("other", 0.4, ("Once", 0.6)), tok('"}', 1.0)]
    found = value_confidence('{"category": "other"}', tokens, "category", "other", CATEGORIES)
    assert found is not None and found.p == pytest.approx(1.0) and found.margin == pytest.approx(1.0)
    assert found.runner_up is None and (found.alternatives_seen, found.values_unlisted) == (0, 0)


def test_it_gives_an_unlisted_allowed_value_the_most_an_unlisted_token_could_have() -> None:
    # The list holds 0.97 of the probability; billing's first token is not in it, so it
    # had at most 0.02 (the least listed) — and at most the 0.03 left over.
    tokens = [tok('{"category": "', 1.0), tok("other", 0.05, ("Once", 0.6), ("the", 0.3), ("tech", 0.02)), tok('"}', 1)]
    found = value_confidence('{"category": "other"}', tokens, "category", "other", CATEGORIES)
    assert found is not None and found.p == pytest.approx(0.05 / 0.09)
    assert found.values_unlisted == 1 and found.margin == pytest.approx((0.05 - 0.02) / 0.09)
    # The written token outside the list (as a grammar forces it): its rivals may be as likely.
    tokens = [
        TokenLogprob('{"word": "zqx-', 0.0),
        TokenLogprob("a", math.log(1e-6), [("Once", math.log(0.5)), ("The", math.log(0.1))]),
        TokenLogprob('mber"}', 0.0),
    ]
    words = ["zqx-amber", "zqx-violet"]
    found = value_confidence('{"word": "zqx-amber"}', tokens, "word", "zqx-amber", words)
    assert found is not None and found.p == pytest.approx(1e-6 / (1e-6 + 0.1))
    # Decoded greedily, the grammar took the likeliest allowed token: the rival had at most as much.
    found = value_confidence('{"word": "zqx-amber"}', tokens, "word", "zqx-amber", words, greedy=True)
    assert found is not None and found.p == pytest.approx(0.5) and found.runner_up == "zqx-violet"


def test_it_follows_a_multi_token_value_past_a_prefix_it_shares_with_another() -> None:
    tokens = [
        tok('{"category": "', 1.0),
        tok("bill", 0.02, ("Once", 0.5), ("oth", 0.01)),  # "bill" leads to billing or bills
        tok("ing", 0.03, ("y", 0.4), ("s", 0.01)),  # "bills" or "billing" is decided here
        tok('"}', 1.0),
    ]
    found = value_confidence('{"category": "billing"}', tokens, "category", "billing", ["billing", "bills", "other"])
    assert found is not None
    assert found.p == pytest.approx(2 / 3 * 3 / 4)  # other: 1/3, bills: 2/3 * 1/4
    assert found.runner_up == "other" and found.margin == pytest.approx(0.5 - 1 / 3)
    assert found.alternatives_seen == 2


def test_it_reads_tokens_that_straddle_the_edges_of_the_value() -> None:
    text = '{"category":"billing","note":"x"}'
    tokens = [
        tok('{"category', 1.0),
        # `":"` could start any value: its share is split between the three.
        tok('":"bill', 0.2, ('":"oth', 0.2), ('":"', 0.3), ('": ', 0.3)),
        # `ing"}` spells the chosen value too; `s",` spells bills.
        tok('ing",', 0.5, ('s",', 0.5), ('ing"}', 0.1)),
        tok('"note":"x"}', 1.0),
    ]
    found = value_confidence(text, tokens, "category", "billing", ["billing", "bills", "other"])
    assert found is not None
    assert found.p == pytest.approx(1 / 7 + 2 / 7 * 0.6 / 1.1)
    assert found.runner_up == "other" and found.margin == pytest.approx(found.p - 3 / 7)
    bills = 1 / 7 + 2 / 7 * 0.5 / 1.1
    assert found.p + 3 / 7 + bills == pytest.approx(1.0)  # the values' shares sum to 1


def test_it_counts_another_spelling_of_the_same_step_with_the_written_token() -> None:
    # llama-server, json_schema mode: ` "` opens the value; ` ` (then `"`) could too, and
    # leaves the same values open, so it says nothing against the value written.
    tokens = [
        tok('{ "mood" :', 1.0),
        tok(' "', 0.6, (" ", 0.25), ("\n", 0.1)),
        tok("s", 0.001, ("h", 0.001), ("I", 0.2)),
        tok('ad" }', 0.1),
    ]
    found = value_confidence('{ "mood" : "sad" }', tokens, "mood", "sad", ["happy", "sad"])
    assert found is not None and found.p == pytest.approx(0.5) and found.runner_up == "happy"


@pytest.mark.parametrize("split", [False, True], ids=["one-token", "two-tokens"])
def test_it_renormalises_a_boolean_over_true_and_false(split: bool) -> None:
    text = '{"urgent": true, "note": "x"}'
    value_tokens = (
        [tok("tr", 1e-6, ("fa", 3e-6), ("1", 0.9)), tok("ue", 0.5, ("e", 0.4))]
        if split
        else [tok("true", 1e-6, ("false", 3e-6), ("1", 0.9), ('"', 0.05))]
    )
    tokens = [tok('{"urgent": ', 1.0), *value_tokens, tok(', "note": "x"}', 1.0)]
    found = value_confidence(text, tokens, "urgent", True, allowed_values({"type": "boolean"}))
    assert found is not None and found.p == pytest.approx(0.25)  # "ue" is the only way on from "tr"
    assert found.runner_up is False and found.margin == pytest.approx(-0.5)


def test_it_counts_null_where_the_type_allows_it() -> None:
    tokens = [tok('{"urgent": ', 1.0), tok("null", 0.01, ("true", 0.01), ('"', 0.5), ("false", 0.02)), tok("}", 1.0)]
    allowed = allowed_values({"type": ["boolean", "null"]})
    found = value_confidence('{"urgent": null}', tokens, "urgent", None, allowed)
    assert found is not None and found.p == pytest.approx(0.25)
    assert found.runner_up is False and found.margin == pytest.approx(0.25 - 0.5)
    # A string where null is allowed: the opening quote's share is the string's.
    tokens = [tok('{"urgent": ', 1.0), tok('"', 0.3, ("null", 0.1), ("x", 0.6)), tok('a"}', 1.0)]
    allowed = allowed_values({"anyOf": [{"enum": ["a"]}, {"type": "null"}]})
    found = value_confidence('{"urgent": "a"}', tokens, "urgent", "a", allowed)
    assert found is not None and found.p == pytest.approx(0.75) and found.runner_up is None


@pytest.mark.parametrize(
    "prop, allowed",
    [
        ({"enum": ["a", "b"]}, ["a", "b"]),
        ({"type": "string", "enum": ["a", None]}, ["a", None]),
        ({"const": 3}, [3]),
        ({"type": "boolean"}, [True, False]),
        ({"type": ["null", "boolean"]}, [True, False, None]),
        ({"anyOf": [{"enum": ["a"]}, {"type": "null"}, {"enum": ["a", "b"]}]}, ["a", None, "b"]),
        ({"type": "string"}, None),
        ({"anyOf": [{"enum": ["a"]}, {"type": "string"}]}, None),
        (None, None),
    ],
)
def test_it_reads_the_allowed_values_off_a_schema_property(prop: Any, allowed: list[Any] | None) -> None:
    assert allowed_values(prop) == allowed


def test_it_measures_agreement_as_the_share_of_draws() -> None:
    found = agreement_confidence("category", ["billing", "billing", "other", "billing", "technical"], "billing")
    assert (found.p, found.margin, found.source) == (pytest.approx(0.6), pytest.approx(0.4), "agreement")


def test_it_synthesises_scripted_logprobs_that_spell_the_answer() -> None:
    text = '{"category": "technical"}'
    tokens = synthetic_logprobs(text, {"category": 0.62}, ENUM_SCHEMA)
    assert "".join(t.token for t in tokens) == text
    found = value_confidence(text, tokens, "category", "technical")
    assert found is not None and found.p == pytest.approx(0.62) and found.margin == pytest.approx(0.62 - 0.38)
    runner_up = next(t for t in tokens if t.logprob < 0).top[1][0]
    assert runner_up != "tech" and "billing".startswith(runner_up)


# -- the gate --------------------------------------------------------------------------------


def gated(tmp_path: Path, answers: Any, gate: dict[str, Any] | None = None, **node: Any) -> Path:
    return write_pack(
        tmp_path / "p",
        nodes={
            "classify": {**GEN, "confidence": gate or {"field": "category", "min": 0.8}, **node},
            "done": {"kind": "end"},
            "review": {"kind": "end"},
        },
        edges=[{"from": "classify", "to": "done"}, {"from": "classify", "on_unsure": "review"}],
        grammars={"classify": ENUM_SCHEMA},
        script={"nodes": {"classify": answers}},
    )


def run(root: Path, **kw: Any) -> tuple[Any, Recorder]:
    pack = load_pack(root)
    assert pack.model is not None
    backend = Recorder(open_backend(pack.model, base_dir=pack.root))
    return run_pack(pack, {"ticket": "my screen is dark"}, backend=backend, **kw), backend


def test_it_takes_on_unsure_below_the_threshold_and_keeps_the_value_it_measured(tmp_path: Path) -> None:
    result, backend = run(gated(tmp_path, {"category": "technical", "$probs": {"category": 0.62}}))
    assert backend.calls[0].logprobs is True
    assert result.trace.path == ["classify", "review"] and result.tier == "escalated"
    [step, _] = result.trace.steps
    assert step.status == "unsure" and step.writes == {} and "category" not in result.state
    assert step.reason == "confidence 0.62 < 0.8 on 'category' (logprobs)"
    assert step.confidence is not None
    assert step.confidence["value"] == "technical" and step.confidence["source"] == "logprobs"
    assert step.confidence["p"] == pytest.approx(0.62)
    assert step.confidence["basis"] == "grammar"  # renormalised over the schema's enum
    assert step.confidence["runner_up"] == "billing" and step.confidence["alternatives_seen"] == 1
    assert "$probs" not in result.trace.attempts[0].text


def test_it_commits_at_or_above_the_threshold(tmp_path: Path) -> None:
    result, _ = run(gated(tmp_path, {"category": "technical", "$probs": {"category": 0.93}}))
    assert result.trace.path == ["classify", "done"] and result.state == {"category": "technical"}
    assert result.tier == "auto" and result.trace.steps[0].confidence["p"] == pytest.approx(0.93)  # type: ignore[index]


def test_it_does_not_hold_a_single_draw_without_logprobs_and_says_why(tmp_path: Path) -> None:
    result, _ = run(gated(tmp_path, {"category": "technical"}))
    assert result.trace.path == ["classify", "done"]
    step = result.trace.steps[0]
    assert step.confidence == {
        "field": "category",
        "value": "technical",
        "p": None,
        "margin": None,
        "source": "none",
    }
    assert "returned no logprobs" in step.reason and "the gate did not hold the node" in step.reason


def test_it_falls_back_to_agreement_between_draws_without_logprobs(tmp_path: Path) -> None:
    answers = [{"category": "technical"}, {"category": "technical"}, {"category": "other"}]
    result, _ = run(gated(tmp_path, answers, samples=3, agree=2))
    step = result.trace.steps[0]
    assert result.trace.path == ["classify", "review"]  # 2 of 3 agree (enough for agree: 2), but 0.67 < 0.8
    assert step.confidence is not None and step.confidence["source"] == "agreement"
    assert step.confidence["p"] == pytest.approx(2 / 3) and step.confidence["value"] == "technical"
    assert step.reason == "confidence 0.667 < 0.8 on 'category' (agreement)"


def test_it_keeps_the_plurality_value_when_draws_disagree(tmp_path: Path) -> None:
    answers = [{"category": "technical"}, {"category": "other"}, {"category": "other"}]
    result, _ = run(gated(tmp_path, answers, samples=3, agree=3))
    step = result.trace.steps[0]
    assert step.status == "unsure" and step.reason.startswith("draws disagreed")
    assert step.confidence is not None and step.confidence["value"] == "other"


def test_it_asks_for_no_logprobs_on_a_node_without_a_gate(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        nodes={"classify": GEN, "done": {"kind": "end"}},
        edges=[{"from": "classify", "to": "done"}],
        grammars={"classify": ENUM_SCHEMA},
        script={"nodes": {"classify": {"category": "other", "$probs": {"category": 0.1}}}},
    )
    result, backend = run(root)
    assert backend.calls[0].logprobs is False and result.status == "done"
    assert result.trace.steps[0].confidence is None and result.state == {"category": "other"}


def test_it_keeps_the_confidence_of_a_step_through_a_resume(tmp_path: Path, sqlite_store: Any) -> None:
    root = write_pack(
        tmp_path / "p",
        nodes={
            "classify": {**GEN, "confidence": {"field": "category", "min": 0.5}},
            "rate": {"kind": "generate", "reads": ["category"], "writes": ["stars"]},
            "done": {"kind": "end"},
        },
        edges=[{"from": "classify", "to": "rate"}, {"from": "rate", "to": "done"}],
        grammars={"classify": ENUM_SCHEMA},
        script={"nodes": {"classify": {"category": "billing", "$probs": {"category": 0.75}}, "rate": {"stars": 4}}},
    )
    pack = load_pack(root)
    store = sqlite_store()

    class Killed(Exception):
        pass

    def die_after_classify(step: Any) -> None:
        if step.node == "classify":
            raise Killed()

    with pytest.raises(Killed):
        run(root, store=store, run_id="r1", options=RunOptions(on_step=die_after_classify))
    assert pack.model is not None
    resumed = resume_run(pack, "r1", backend=open_backend(pack.model, base_dir=pack.root), store=store)
    assert resumed.status == "done"
    first = resumed.trace.steps[0]
    assert first.replayed and first.confidence is not None and first.confidence["p"] == pytest.approx(0.75)
    again = Trace.from_dict(json.loads(json.dumps(resumed.trace.to_dict())))
    assert again.steps[0].confidence == first.confidence


def test_it_sends_no_probs_key_and_fails_a_run_on_a_malformed_one(tmp_path: Path) -> None:
    result, _ = run(gated(tmp_path, {"category": "other", "$probs": {"category": 1.5}}))
    assert result.status == "failed" and "$probs must map field names to probabilities" in (result.trace.error or "")


def test_it_gives_scripted_logprobs_only_when_asked(tmp_path: Path) -> None:
    root = gated(tmp_path, {"category": "billing", "$probs": {"category": 0.5}})
    backend = open_backend(load_pack(root).model or "", base_dir=root)
    call = ModelCall(run_id="r", node="classify", attempt=1, messages=[{"role": "user", "content": "?"}], schema=None)
    assert backend.complete(call).logprobs is None
    call.logprobs = True
    reply = backend.complete(call)
    assert json.loads(reply.text) == {"category": "billing"} and reply.logprobs is not None


# -- loading ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "gate, message",
    [
        ({"field": "colour", "min": 0.8}, "confidence: grammars/classify.json has no field 'colour'"),
        ({"field": "note", "min": 0.8}, "confidence: node 'classify' does not write 'note'"),
        ({"fields": ["category", "note"], "min": 0.8}, "confidence: node 'classify' does not write 'note'"),
        ({"fields": ["category", "category"], "min": 0.8}, "confidence: fields names a field twice"),
        ({"fields": [], "min": 0.8}, "confidence: fields must be a list of field names"),
        ({"fields": "category", "min": 0.8}, "confidence: fields must be a list of field names"),
        ({"field": ["category"], "min": 0.8}, "confidence: field must be one field's name; for several, write fields"),
        ({"field": "category", "fields": ["summary"], "min": 0.8}, "takes field (one) or fields (several), not both"),
        ({"fields": ["category", "summary"], "min": 0.8, "max": 1}, "it takes fields and min"),
        ({"field": "category", "min": 0}, "confidence: min must be a number above 0 and at most 1"),
        ({"field": "category", "min": 1.2}, "confidence: min must be a number above 0 and at most 1"),
        ({"field": "category", "min": True}, "confidence: min must be a number above 0 and at most 1"),
        ({"field": "category"}, "confidence must be a mapping {field: NAME, min: P}"),
        ({"field": "category", "min": 0.8, "max": 1}, "confidence has unknown key(s) 'max'"),
    ],
)
def test_it_refuses_a_bad_gate_naming_the_line(tmp_path: Path, gate: dict[str, Any], message: str) -> None:
    schema = {
        "type": "object",
        "properties": {
            "category": {"enum": ["billing", "other"]},
            "summary": {"type": "string"},
            "note": {"enum": ["a", "b"]},
        },
        "required": ["category", "summary"],
    }
    root = gated(tmp_path, {"category": "other"}, gate, writes=["category", "summary"])
    (root / "grammars" / "classify.json").write_text(json.dumps(schema))
    [issue] = issues_of(root)
    assert message in issue and issue.startswith("graph.yaml:")


def test_it_accepts_a_gate_on_a_boolean_field(tmp_path: Path) -> None:
    root = gated(tmp_path, {"urgent": True, "note": "x"}, {"field": "urgent", "min": 1}, writes=["urgent", "note"])
    (root / "grammars" / "classify.json").write_text(json.dumps(FLAG_SCHEMA))
    gate = load_pack(root).nodes["classify"].confidence
    assert gate is not None and (gate.field, gate.min) == ("urgent", 1.0)


def test_it_allows_on_unsure_on_a_single_draw_only_with_a_gate(tmp_path: Path) -> None:
    root = gated(tmp_path, {"category": "other"})
    assert load_pack(root).nodes["classify"].samples == 1
    graph = (root / "graph.yaml").read_text().replace("confidence:", "x_gate:")
    (root / "graph.yaml").write_text(graph)
    found = issues_of(root)
    assert any("has an on_unsure edge but no 'samples'" in i for i in found)
