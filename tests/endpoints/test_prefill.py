"""`prefill=true` on a `grammar=gbnf` endpoint: the answer's fixed opening (`{"` and the
first property's name) goes out as the start of an assistant message, the grammar covers
the rest, and the reply is the whole answer again, its logprobs spelling it. Against the
fault-injecting server (what is sent; a server that returns only the continuation), the
stories260K llama-server (the rest-of-answer grammar is accepted and holds) and SmolLM2
(the same greedy answer and confidence as without, in fewer decoded tokens)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from runtime import load_pack
from runtime.backends import ModelCall
from runtime.backends._grammar import opening, schema_to_gbnf
from runtime.backends.openai import parse_spec
from runtime.confidence import allowed_values, value_confidence
from runtime.errors import BadSpec
from runtime.messages import build_messages
from tests.support import model_servers
from tests.support.fault_server import FaultServer, in_order
from tests.support.model_servers import REPO, Opener, RunningServer
from tests.support.packs import GBNF_SCHEMAS, RATING_SCHEMA
from tests.support.smollm2_packs import smol_spec

MESSAGES = [{"role": "user", "content": "Rate the story."}]


def call(
    schema: dict[str, Any] | None = RATING_SCHEMA,
    messages: list[dict[str, str]] = MESSAGES,
    attempt: int = 1,
    **kw: Any,
) -> ModelCall:
    return ModelCall(run_id="run7", node="rate", attempt=attempt, schema=schema, messages=messages, **kw)


def test_the_opening_is_the_first_required_name_without_its_closing_quote() -> None:
    assert opening(RATING_SCHEMA) == '{"mood'
    assert (
        opening({"properties": {'say "hi"\\': {"type": "string"}}, "required": ['say "hi"\\']}) == '{"say \\"hi\\"\\\\'
    )
    assert opening({"type": "object", "properties": {"größe": {}}, "required": ["größe"]}) == '{"größe'
    optional_first = {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["b"]}
    others = (
        {"type": "array"},
        {"type": ["object"]},
        {"type": "null"},
        {"$ref": "#/$defs/x"},
        {"anyOf": [RATING_SCHEMA]},
        {},
    )
    for schema in (optional_first, *others):
        assert opening(schema) is None, schema


def test_values_the_answer_already_holds_are_written_first() -> None:
    """A quorum's settled fields (sure_fields): compact, in their order, before the name
    of the first field asked for; the answer then parses with every field."""
    city = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    written = opening(city, {"name": 'Zoë "Z"', "age": 7, "tags": ["a", None]})
    assert written == '{"name":"Zoë \\"Z\\"","age":7,"tags":["a",null],"city'
    assert json.loads(written + '":"Oslo"}') == {"name": 'Zoë "Z"', "age": 7, "tags": ["a", None], "city": "Oslo"}
    assert opening(city, {}) == opening(city) == '{"city'
    # No opening to write the rest after: nothing is written, given or not.
    assert opening({"type": "object", "properties": {"city": {}}}, {"name": "ann"}) is None


def test_the_opened_grammar_keeps_optional_properties_and_escaped_names() -> None:
    schema = {
        "type": "object",
        "properties": {'a"b': {"enum": [1]}, "c": {"type": "boolean"}},
        "required": ['a"b'],
    }
    root = schema_to_gbnf(schema, compact=True, opened=True).text.splitlines()[0]
    assert root == 'root ::= "\\"" ":" ("1") ( "," "\\"c\\"" ":" boolean )? "}"'
    written = opening(schema)
    assert written == '{"a\\"b'
    # The opening is how JSON itself writes the name, and the root matches what follows it.
    answer = json.dumps({'a"b': 1}, separators=(",", ":"))
    assert answer.startswith(written) and answer[len(written) :] == '":1}'


@pytest.mark.parametrize(
    ("compact", "root"),
    [
        (
            True,
            'root ::= "\\"" ":" ("\\"happy\\"" | "\\"sad\\"" | "\\"calm\\"") "," "\\"stars\\"" ":" ("1" | "2" | "3") "}"',
        ),
        (
            False,
            'root ::= "\\"" ":" ws ("\\"happy\\"" | "\\"sad\\"" | "\\"calm\\"") "," ws "\\"stars\\"" ":" ws ("1" | "2" | "3") ws "}"',
        ),
    ],
    ids=["compact", "spaced"],
)
def test_the_opened_grammar_matches_the_rest_of_the_answer(compact: bool, root: str) -> None:
    assert schema_to_gbnf(RATING_SCHEMA, compact=compact, opened=True).text.splitlines()[0] == root
    with pytest.raises(ValueError, match="no opening"):
        schema_to_gbnf({"type": "array"}, opened=True)


def test_prefill_needs_the_gbnf_grammar() -> None:
    with pytest.raises(BadSpec, match="prefill=true needs grammar=gbnf"):
        parse_spec("openai:http://127.0.0.1:1/v1#m;prefill=true")
    assert parse_spec("openai:http://127.0.0.1:1/v1#m;grammar=gbnf;prefill=true").prefill is True


def test_it_writes_the_opening_ahead_and_sends_the_rest_as_grammar(opened: Opener, fault: FaultServer) -> None:
    fault.configure(answer='{"mood":"happy","stars":1}')  # the whole answer, as llama-server returns it
    reply = opened(fault.spec("grammar=gbnf;prefill=true")).complete(call(logprobs=True))
    body = fault.completions()[0].body
    assert body["messages"] == [*MESSAGES, {"role": "assistant", "content": '{"mood'}]
    assert body["grammar"] == schema_to_gbnf(RATING_SCHEMA, compact=True, opened=True).text
    assert json.loads(reply.text) == {"mood": "happy", "stars": 1}
    assert reply.logprobs is not None and "".join(t.token for t in reply.logprobs) == reply.text


def test_it_puts_the_opening_back_when_a_server_returns_only_the_rest(opened: Opener, fault: FaultServer) -> None:
    fault.configure(answer='":"sad","stars":2}')
    reply = opened(fault.spec("grammar=gbnf;prefill=true")).complete(call(logprobs=True))
    assert reply.text == '{"mood":"sad","stars":2}'
    assert reply.logprobs is not None and "".join(t.token for t in reply.logprobs) == reply.text
    first = reply.logprobs[0]
    assert (first.token, first.logprob, first.top) == ('{"mood', 0.0, [('{"mood', 0.0)])  # the grammar's only way


def test_it_writes_the_given_values_ahead_and_grammars_the_rest(opened: Opener, fault: FaultServer) -> None:
    stars = {"type": "object", "properties": {"stars": RATING_SCHEMA["properties"]["stars"]}, "required": ["stars"]}
    fault.configure(answer=in_order('":2}', '{"stars":3}'))  # the first, only the continuation
    reply = opened(fault.spec("grammar=gbnf;prefill=true")).complete(call(schema=stars, given={"mood": "sad"}))
    body = fault.completions()[0].body
    assert body["messages"] == [*MESSAGES, {"role": "assistant", "content": '{"mood":"sad","stars'}]
    assert body["grammar"] == schema_to_gbnf(stars, compact=True, opened=True).text
    assert json.loads(reply.text) == {"mood": "sad", "stars": 2}
    opened(fault.spec("grammar=gbnf")).complete(call(schema=stars, given={"mood": "sad"}))
    assert fault.completions()[1].body["messages"] == MESSAGES  # without prefill the values are not sent


CONTINUATION = '":"sad","stars":2}'  # a server that returns only what it generated


@pytest.mark.parametrize(
    ("options", "the_call"),
    [
        ("grammar=gbnf", call()),  # prefill is off by default
        ("grammar=gbnf;prefill=true", call(schema={"type": "object", "properties": {"a": {}}})),  # a has no opening
        ("grammar=gbnf;prefill=true", call(schema=None)),  # unconstrained (two_stage's reasoning)
        ("grammar=gbnf;prefill=true", call(messages=[*MESSAGES, {"role": "assistant", "content": "I think"}])),
    ],
    ids=["off", "optional-first", "no-schema", "ends-in-assistant"],
)
def test_it_writes_no_opening_where_there_is_none_to_write(
    opened: Opener, fault: FaultServer, options: str, the_call: ModelCall
) -> None:
    fault.configure(answer=CONTINUATION)
    reply = opened(fault.spec(options)).complete(the_call)
    body = fault.completions()[0].body
    assert body["messages"] == the_call.messages
    assert not body.get("grammar", "").startswith('root ::= "\\"" ":"')
    assert reply.text == CONTINUATION  # nothing put in front: no opening was written


@pytest.mark.parametrize("schema", [RATING_SCHEMA, *GBNF_SCHEMAS], ids=["rating", "strings-arrays", "nested", "refs"])
def test_llama_server_holds_the_rest_of_the_answer_to_the_grammar(
    llama_server: RunningServer, opened: Opener, schema: dict[str, Any]
) -> None:
    written = opening(schema)
    assert written is not None
    backend = opened(model_servers.spec(llama_server, "grammar=gbnf;prefill=true"))
    for attempt, temperature in enumerate((0.0, 0.8, 1.0), start=1):
        reply = backend.complete(
            call(schema=schema, attempt=attempt, max_tokens=256, temperature=temperature, logprobs=True)
        )
        assert reply.text.startswith(written + '"'), reply.text
        jsonschema.validate(json.loads(reply.text), schema)
        assert reply.logprobs is not None and "".join(t.token for t in reply.logprobs) == reply.text


def test_llama_server_writes_the_rest_after_the_given_values(llama_server: RunningServer, opened: Opener) -> None:
    stars = {"type": "object", "properties": {"stars": RATING_SCHEMA["properties"]["stars"]}, "required": ["stars"]}
    backend = opened(model_servers.spec(llama_server, "grammar=gbnf;prefill=true"))
    for attempt, temperature in enumerate((0.0, 1.0), start=1):
        reply = backend.complete(
            call(schema=stars, attempt=attempt, temperature=temperature, logprobs=True, given={"mood": "calm"})
        )
        assert reply.text.startswith('{"mood":"calm","stars"'), reply.text
        jsonschema.validate(json.loads(reply.text), RATING_SCHEMA)
        assert reply.logprobs is not None and "".join(t.token for t in reply.logprobs) == reply.text


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_smollm2_gives_the_same_answer_and_confidence_in_fewer_decoded_tokens(
    smollm2_server: RunningServer, opened: Opener
) -> None:
    """The benchmark routing pack's department node, greedy, on three of its cases whose
    answer is not a near tie (llama.cpp reads the opening in a batch, whose arithmetic
    may differ from decoding in the last digits: a tie could fall the other way)."""
    pack = load_pack(REPO / "benchmarks" / "packs" / "helpdesk_routing")
    node = pack.nodes["department"]
    allowed = allowed_values(node.schema["properties"]["department"])
    backends = {p: opened(smol_spec(smollm2_server, f"grammar=gbnf;prefill={p}")) for p in ("false", "true")}
    for case in (c for c in pack.cases if c.id in ("hd-03", "hd-07", "hd-11")):
        messages = build_messages(pack, node, {}, case.input).messages
        replies = {
            p: b.complete(ModelCall(f"r-{case.id}-{p}", "department", 1, messages, node.schema, 32, logprobs=True))
            for p, b in backends.items()
        }
        plain, written = replies["false"], replies["true"]
        assert written.text == plain.text and written.text.startswith('{"department"'), case.id
        value = json.loads(plain.text)["department"]
        p_plain = value_confidence(plain.text, plain.logprobs, "department", value, allowed, greedy=True)
        p_written = value_confidence(written.text, written.logprobs, "department", value, allowed, greedy=True)
        assert p_plain is not None and p_written is not None
        assert p_written.p == pytest.approx(p_plain.p, abs=1e-3), case.id
        # `{"` and `department` are read with the prompt instead of decoded one at a time.
        assert written.completion_tokens == plain.completion_tokens - 2, (case.id, written, plain)
