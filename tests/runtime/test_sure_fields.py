"""`sure_fields: true`: a quorum's `sure` judged field by field (runtime.nodes.sure_fields).
Against the fault server, one character a token, so each character's logprob is set:
upper-case letters are unlikely (p=0.1), everything else likely (p=0.9)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runtime import load_pack, open_backend, run_pack
from runtime.backends import Backend
from runtime.nodes.sure_fields import field_least_p, partial_ask, value_spans
from runtime.tiers import candidates
from runtime.trace_items import Attempt
from tests.support.fault_server import FaultServer, in_order
from tests.support.runtime_packs import issues_of, write_pack

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "city": {"type": "string"}},
    "required": ["name", "city"],
    "additionalProperties": False,
}


def detail_pack(tmp_path: Path, schema: dict[str, Any] = SCHEMA, **node: Any) -> Path:
    spec = {
        "kind": "generate",
        "reads": ["input.ticket"],
        "writes": ["name", "city"],
        "samples": 3,
        "agree": 2,
        "sure": 0.5,
        "sure_fields": True,
        **node,
    }
    spec = {key: value for key, value in spec.items() if value is not None}  # None: the key left out
    return write_pack(
        tmp_path / "p",
        nodes={"extract": spec, "done": {"kind": "end"}, "human": {"kind": "end"}},
        edges=[{"from": "extract", "to": "done"}, {"from": "extract", "on_unsure": "human"}],
        grammars={"extract": schema},
    )


def by_case(body: dict[str, Any], piece: str) -> list[tuple[str, float]]:
    return [(piece, math.log(0.1 if piece.isupper() else 0.9))]


def sent_schema(fault: FaultServer, n: int) -> dict[str, Any]:
    schema: dict[str, Any] = fault.completions()[n].body["response_format"]["json_schema"]["schema"]
    return schema


@pytest.fixture
def chars(fault: FaultServer) -> FaultServer:
    fault.configure(chunk_chars=1, alternatives=by_case)
    return fault


def test_later_draws_ask_for_the_unsure_field_only(tmp_path: Path, chars: FaultServer, backend: Backend) -> None:
    chars.configure(answer=in_order('{"name":"ann","city":"PARIS"}', '{"city":"PARIS"}'))
    result = run_pack(load_pack(detail_pack(tmp_path)), {"ticket": "t"}, backend=backend)
    assert result.output == {"name": "ann", "city": "PARIS"}
    assert len(chars.completions()) == 2  # the second draw agrees: the vote is decided
    assert set(sent_schema(chars, 0)["properties"]) == {"name", "city"}
    second = sent_schema(chars, 1)
    assert set(second["properties"]) == {"city"} and second["required"] == ["city"]
    assert chars.completions()[1].body["messages"] == chars.completions()[0].body["messages"]  # the prompt is reused
    notes = result.trace.steps[0].notes
    assert "later draws ask for city only: name settled by the first draw (every token of each had p >= 0.5)" in notes


def test_a_later_draw_is_the_settled_values_plus_its_own(tmp_path: Path, chars: FaultServer, backend: Backend) -> None:
    """Draws 2 and 3 agree on the city against the first: their city wins, with the
    settled name; the first draw's own city is not committed."""
    chars.configure(answer=in_order('{"name":"ann","city":"PARIS"}', '{"city":"lyon"}', '{"city":"lyon"}'))
    result = run_pack(load_pack(detail_pack(tmp_path)), {"ticket": "t"}, backend=backend)
    assert result.output == {"name": "ann", "city": "lyon"}
    assert len(chars.completions()) == 3


def test_disagreeing_later_draws_leave_the_node_unsure(tmp_path: Path, chars: FaultServer, backend: Backend) -> None:
    chars.configure(answer=in_order('{"name":"ann","city":"PARIS"}', '{"city":"lyon"}', '{"city":"nice"}'))
    result = run_pack(load_pack(detail_pack(tmp_path)), {"ticket": "t"}, backend=backend)
    assert result.trace.path == ["extract", "human"]
    step = result.trace.steps[0]
    assert step.reason == "draws disagreed (1, 1, 1 of 3; need 2)"
    assert any(n.startswith("later draws ask for city only") for n in step.notes)


def test_a_later_answer_is_verified_with_the_settled_values(
    tmp_path: Path, chars: FaultServer, backend: Backend
) -> None:
    """The partial answer alone would miss `name`; completed, it passes the node's schema.
    An answer the grammar let through with a wrong type is still rejected and re-drawn."""
    chars.configure(answer=in_order('{"name":"ann","city":"PARIS"}', '{"city":7}', '{"city":"PARIS"}'))
    result = run_pack(load_pack(detail_pack(tmp_path)), {"ticket": "t"}, backend=backend)
    assert result.output == {"name": "ann", "city": "PARIS"}
    rejected = [a for a in result.trace.attempts if not a.ok]
    assert len(rejected) == 1 and rejected[0].category == "schema"


@pytest.mark.parametrize(("per_field", "calls"), [(True, 1), (False, 2)], ids=["sure_fields", "plain-sure"])
def test_every_value_sure_stands_alone_whatever_the_keys(
    tmp_path: Path, chars: FaultServer, backend: Backend, per_field: bool, calls: int
) -> None:
    """Upper-case keys are unlikely tokens outside any value: plain `sure` goes on to a
    second draw, `sure_fields` reads the values only and stops at one."""
    schema = {**SCHEMA, "properties": {"NAME": {"type": "string"}, "CITY": {"type": "string"}}}
    schema["required"] = ["NAME", "CITY"]
    chars.configure(answer=lambda body: '{"NAME":"ann","CITY":"paris"}')
    root = detail_pack(tmp_path, schema, writes=["NAME", "CITY"], sure_fields=per_field)
    result = run_pack(load_pack(root), {"ticket": "t"}, backend=backend)
    assert result.output == {"NAME": "ann", "CITY": "paris"}
    assert len(chars.completions()) == calls
    settled = "settled by its first draw: every token of each field's value had p >= 0.5 (sure: 0.5)"
    assert (settled in result.trace.steps[0].notes) is per_field


def test_a_schema_that_ties_fields_together_draws_whole_answers(
    tmp_path: Path, chars: FaultServer, backend: Backend
) -> None:
    schema = {**SCHEMA, "anyOf": [{"required": ["name"]}, {"required": ["city"]}]}
    chars.configure(answer=lambda body: '{"name":"ann","city":"PARIS"}')
    result = run_pack(load_pack(detail_pack(tmp_path, schema)), {"ticket": "t"}, backend=backend)
    assert result.output == {"name": "ann", "city": "PARIS"}
    assert set(sent_schema(chars, 1)["properties"]) == {"name", "city"}
    assert not any(n.startswith("later draws ask") for n in result.trace.steps[0].notes)


def test_sure_fields_without_sure_is_refused_at_load(tmp_path: Path) -> None:
    root = detail_pack(tmp_path, sure=None)
    assert any("sure_fields judges `sure` field by field; give sure: P" in i for i in issues_of(root)), issues_of(root)


@dataclass
class Tok:
    token: str
    logprob: float


def toks(*pieces: tuple[str, float]) -> list[Tok]:
    return [Tok(t, math.log(p)) for t, p in pieces]


def test_value_spans_cover_each_top_level_value() -> None:
    text = ' { "a" : [1, {"b": "}"}] , "c":null }\n'
    spans = value_spans(text)
    assert spans is not None
    assert {k: text[a:b] for k, (a, b) in spans.items()} == {"a": '[1, {"b": "}"}]', "c": "null"}
    for bad in ("[1]", '{"a":1} x', '{"a":1', '{"a" 1}', '{"a":1 "b":2}', ""):
        assert value_spans(bad) is None, bad


def test_field_least_p_takes_each_value_its_least_likely_token() -> None:
    text = '{"a":"xy","b":12}'
    # tokens straddling a value's start or end count for it; keys and punctuation for none
    tokens = toks(('{"a":"', 0.95), ("x", 0.9), ('y","b', 0.6), ('":', 0.1), ("12", 0.7), ("}", 0.3))
    assert field_least_p(text, tokens) == pytest.approx({"a": 0.6, "b": 0.7})
    opening = toks(('{"a":"', 0.2), ("x", 0.9), ('y","b', 0.95), ('":', 0.1), ("12", 0.7), ("}", 0.3))
    assert field_least_p(text, opening) == pytest.approx({"a": 0.2, "b": 0.7})
    assert field_least_p(text, toks(("{", 0.9))) is None  # the tokens do not spell the text
    assert field_least_p(text, None) is None


def test_partial_ask_keeps_the_schema_but_the_settled_properties() -> None:
    answer = {"name": "ann", "city": "paris"}
    ask = partial_ask(SCHEMA, answer, {"name": 0.8, "city": 0.2}, 0.5)
    assert ask is not None
    assert ask.settled == {"name": "ann"} and ask.rest == ("city",)
    assert ask.schema == {**SCHEMA, "properties": {"city": {"type": "string"}}, "required": ["city"]}
    assert ask.complete({"city": "lyon"}) == {"name": "ann", "city": "lyon"}
    assert ask.complete([1]) == [1]  # not an object: the verifier says what is wrong
    assert partial_ask(SCHEMA, answer, {"name": 0.2, "city": 0.2}, 0.5) is None  # nothing settled
    every = partial_ask(SCHEMA, answer, {"name": 0.9, "city": 0.9}, 0.5)
    assert every is not None and every.rest == () and "required" not in every.schema
    assert partial_ask({"type": "object"}, answer, {"name": 0.9}, 0.5) is None  # no properties to split
    refs = {**SCHEMA, "$defs": {"word": {"type": "string"}}, "properties": {"name": {"$ref": "#/$defs/word"}}}
    refs["properties"]["city"] = {"$ref": "#/$defs/word"}
    kept = partial_ask(refs, answer, {"name": 0.8, "city": 0.2}, 0.5)
    assert kept is not None and kept.schema["$defs"] == refs["$defs"]  # references still resolve
    optional = {**SCHEMA, "properties": {**SCHEMA["properties"], "note": {"type": "string"}}}
    alone = partial_ask(optional, answer, {"name": 0.9, "city": 0.9}, 0.5)
    assert alone is not None and alone.rest == ()  # a property left out does not keep the draws going
    unsure = partial_ask(optional, answer, {"name": 0.9, "city": 0.2}, 0.5)
    assert unsure is not None and unsure.rest == ("city", "note")
    assert json.dumps(SCHEMA["required"]) == '["name", "city"]'  # the node's own schema is left as it was


def test_a_later_draw_cannot_change_a_settled_value(tmp_path: Path, chars: FaultServer, backend: Backend) -> None:
    """An endpoint that sends no grammar lets a later draw write every field: the
    settled name stands, the vote is on the city."""
    chars.configure(answer=in_order('{"name":"ann","city":"PARIS"}', '{"name":"bob","city":"PARIS"}'))
    result = run_pack(load_pack(detail_pack(tmp_path)), {"ticket": "t"}, backend=backend)
    assert result.output == {"name": "ann", "city": "PARIS"} and len(chars.completions()) == 2


def test_a_rejected_later_draw_goes_down_its_ladder_with_the_partial_grammar(
    tmp_path: Path, chars: FaultServer, backend: Backend
) -> None:
    chars.configure(answer=in_order('{"name":"ann","city":"PARIS"}', '{"city":"ann"}', '{"city":"PARIS"}'))
    root = detail_pack(tmp_path, **{"assert": "city != name"})  # a check over a settled and an asked field
    result = run_pack(load_pack(root), {"ticket": "t"}, backend=backend)
    assert result.output == {"name": "ann", "city": "PARIS"}
    assert [set(sent_schema(chars, n)["properties"]) for n in range(3)] == [{"name", "city"}, {"city"}, {"city"}]
    later = [a for a in result.trace.attempts if a.given is not None]
    assert [(a.ok, a.category, a.given) for a in later] == [
        (False, "assert", {"name": "ann"}),
        (True, None, {"name": "ann"}),
    ]
    assert result.trace.attempts[0].given is None  # the first draw was asked for everything


def test_with_prefill_a_later_draw_writes_its_field_after_the_settled_values(
    tmp_path: Path, chars: FaultServer
) -> None:
    """On a `prefill=true` endpoint the settled values go out as the answer's start, so
    the model writes the unsure field after them, as it did in the first draw, instead
    of an answer that opens with it."""
    chars.configure(answer=in_order('{"name":"ann","city":"PARIS"}', '":"PARIS"}'))  # the rest only
    backend = open_backend(chars.spec("backoff=0.01;grammar=gbnf;prefill=true"))
    try:
        result = run_pack(load_pack(detail_pack(tmp_path)), {"ticket": "t"}, backend=backend)
    finally:
        backend.close()
    assert result.output == {"name": "ann", "city": "PARIS"} and len(chars.completions()) == 2
    first, later = (c.body["messages"][-1] for c in chars.completions())
    assert first == {"role": "assistant", "content": '{"name'}
    assert later == {"role": "assistant", "content": '{"name":"ann","city'}
    assert result.trace.attempts[1].text == '{"name":"ann","city":"PARIS"}'
    assert result.trace.attempts[1].given == {"name": "ann"}


def test_a_person_sees_later_draws_with_the_settled_values() -> None:
    """Escalation candidates (runtime.tiers) are whole answers, not the partial texts."""
    first = Attempt(node="n", step=0, attempt=1, stage="sample", ok=True, text='{"name":"ann","city":"PARIS"}')
    later = Attempt(node="n", step=0, attempt=2, stage="sample", ok=True, text='{"city":"lyon"}', given={"name": "ann"})
    got = candidates([first, later], "n", "small", "ok", "", {"name": "ann", "city": "lyon"})
    assert [(c["answer"], c["status"]) for c in got] == [
        ({"name": "ann", "city": "PARIS"}, "unsure"),
        ({"city": "lyon", "name": "ann"}, "ok"),
    ]
