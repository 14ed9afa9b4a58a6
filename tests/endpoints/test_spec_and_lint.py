"""Spec strings, the retry schedule, the GBNF converter and the schema lint: pure functions."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

import runtime.backends.openai as openai_backend
from runtime.backends._grammar import schema_to_gbnf
from runtime.backends._retry import Failure, RetryPolicy, classify_status, parse_retry_after
from runtime.backends.openai import EndpointConfig, parse_spec
from runtime.endpoints import lint_schema
from runtime.errors import BadSpec
from tests.support.model_servers import REPO
from tests.support.packs import write_chain_pack


def test_it_pins_the_public_names_of_the_openai_backend() -> None:
    assert sorted(openai_backend.__all__) == [
        "EndpointConfig",
        "EndpointRejected",
        "EndpointUnavailable",
        "GRAMMAR_MODES",
        "OpenAIBackend",
        "parse_spec",
    ]


def test_it_parses_a_spec_with_defaults() -> None:
    config = parse_spec("openai:http://127.0.0.1:8080/v1/#qwen2.5:0.5b")
    assert config == EndpointConfig(base_url="http://127.0.0.1:8080/v1", model="qwen2.5:0.5b")
    assert (config.grammar, config.concurrency, config.attempts, config.deadline, config.timeout) == (
        "json_schema",
        4,
        6,
        120.0,
        60.0,
    )


def test_it_parses_every_option() -> None:
    config = parse_spec(
        "openai:https://api.example.com/v1#gpt-4o-mini;grammar=gbnf;key_env=PROVIDER_API_KEY;"
        "concurrency=8;attempts=3;deadline=30;timeout=5;backoff=0.25;jitter=off;"
        "price_in=0.15;price_out=0.6;usage=false;strict=true"
    )
    assert (config.grammar, config.key_env, config.concurrency, config.attempts, config.deadline) == (
        "gbnf",
        "PROVIDER_API_KEY",
        8,
        3,
        30.0,
    )
    assert (config.timeout, config.backoff, config.jitter, config.price_in, config.price_out) == (
        5.0,
        0.25,
        False,
        0.15,
        0.6,
    )
    assert (config.usage, config.strict) == (False, True)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("openai:http://h/v1", "needs a model after '#'"),
        ("openai:h:8080/v1#m", "must start with http"),
        ("openai:http://h/v1#m;grammar=regex", "grammar='regex': must be one of"),
        ("openai:http://h/v1#m;concurrency=0", "must be from 1"),
        ("openai:http://h/v1#m;colour=red", "known key"),
        ("openai:http://h/v1#m;key_env=sk-abc123", "NAME of an environment variable"),
        ("openai:http://h/v1#m;key_env=sk_live_abc123", "NAME of an environment variable"),
        ("openai:http://h/v1#m;attempts=2;attempts=3", "given twice"),
    ],
)
def test_it_refuses_a_bad_spec_with_a_reason(spec: str, message: str) -> None:
    with pytest.raises(BadSpec, match=message) as info:
        parse_spec(spec)
    assert "abc123" not in str(info.value)  # a key pasted into key_env is never echoed


@pytest.mark.parametrize(
    "status, retry_after, message, kind",
    [
        (503, 2.0, "busy", "overloaded"),
        (429, 1.0, "slow down", "overloaded"),
        (503, None, "Loading model", "loading"),
        (503, None, "busy", "server"),
        (429, None, "slow down", "server"),
        (500, None, "", "server"),
        (502, None, "", "server"),
        (504, None, "", "server"),
        (408, None, "", "server"),
        (400, None, "", "rejected"),
        (401, None, "", "rejected"),
        (403, None, "", "rejected"),
        (404, None, "", "rejected"),
        (422, None, "", "rejected"),
        (413, None, "", "rejected"),
    ],
)
def test_it_classifies_http_statuses(status: int, retry_after: float | None, message: str, kind: str) -> None:
    assert classify_status(status, retry_after, message).kind == kind


def test_it_reads_retry_after_as_seconds_or_a_date() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("0.5") == 0.5
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == pytest.approx(10.0)
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


def test_it_never_schedules_a_retry_before_retry_after() -> None:
    policy = RetryPolicy(backoff_s=0.5, rng=random.Random(7).random)
    for kind in ("overloaded", "server"):
        delays = [policy.delay(Failure(kind, "", 503, retry_after=2.0), n) for n in range(1, 6) for _ in range(200)]
        assert min(delays) >= 2.0 and max(delays) <= 20.0
        assert len({round(d, 3) for d in delays}) > 100  # jittered: clients rejected together spread out


def test_it_backs_off_exponentially_and_exactly_without_jitter() -> None:
    policy = RetryPolicy(backoff_s=0.5, jitter=False)
    assert [policy.delay(Failure("server", ""), n) for n in range(1, 8)] == [0.5, 1, 2, 4, 8, 16, 20]
    assert policy.delay(Failure("overloaded", "", 503, 3.0), 1) == 3.0


def test_it_turns_a_schema_into_gbnf_with_bounded_integers_as_alternatives() -> None:
    grammar = schema_to_gbnf(
        {
            "type": "object",
            "properties": {
                "mood": {"enum": ["happy", "sad"]},
                "stars": {"type": "integer", "minimum": 1, "maximum": 3},
            },
            "required": ["mood", "stars"],
        }
    )
    assert grammar.ignored == []
    assert grammar.text.splitlines()[0] == (
        'root ::= "{" ws ( ( "\\"mood\\"" ":" ws ("\\"happy\\"" | "\\"sad\\"") "," ws "\\"stars\\"" ":" ws '
        '("1" | "2" | "3") ) ) ws "}"'
    )


def test_it_lets_optional_properties_be_left_out_in_gbnf() -> None:
    text = schema_to_gbnf({"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "null"}}}).text
    root = text.splitlines()[0]
    assert root.endswith('| "" ) ws "}"')  # {} is allowed when nothing is required
    assert '( "," ws "\\"b\\"" ":" ws null )?' in root


def test_it_reports_what_gbnf_cannot_express() -> None:
    grammar = schema_to_gbnf(
        {
            "type": "object",
            "properties": {
                "code": {"type": "string", "pattern": "^[A-Z]+$"},
                "x": {"type": "number", "minimum": 0.5},
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                "n": {"type": "integer", "multipleOf": 5, "minimum": -1000000},
            },
        }
    )
    assert sorted(grammar.ignored) == [
        ("/properties/code", "pattern"),
        ("/properties/n", "minimum"),
        ("/properties/n", "multipleOf"),
        ("/properties/tags", "uniqueItems"),
        ("/properties/x", "minimum"),
    ]


SCHEMA = {
    "type": "object",
    "properties": {
        "stars": {"type": "integer", "minimum": 1, "maximum": 5},
        "price": {"type": "number", "exclusiveMinimum": 0},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$", "format": "date"},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
    },
}


def keywords(mode: str) -> set[tuple[str, str]]:
    return {(w.path, w.keyword) for w in lint_schema(SCHEMA, mode, "rate")}


def test_it_lints_what_json_schema_mode_does_not_enforce() -> None:
    assert keywords("json_schema") == {
        ("/properties/price", "exclusiveMinimum"),
        ("/properties/code", "format"),
        ("/properties/tags", "uniqueItems"),
    }


def test_it_lints_integer_bounds_and_raw_strings_for_json_object_mode() -> None:
    found = keywords("json_object")
    assert {("/properties/stars", "minimum"), ("/properties/stars", "maximum")} <= found
    assert ("/properties/code", "pattern") not in found
    assert ("/properties/code", "string (raw control characters)") in found


def test_it_lints_gbnf_mode_from_the_converter() -> None:
    assert keywords("gbnf") == {
        ("/properties/price", "exclusiveMinimum"),
        ("/properties/code", "pattern"),
        ("/properties/code", "format"),
        ("/properties/tags", "uniqueItems"),
    }


def test_it_lints_everything_for_mode_none() -> None:
    [warning] = lint_schema(SCHEMA, "none", "rate")
    assert "grammar=none sends no schema" in str(warning)


def pf(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runtime", *args], capture_output=True, text=True, cwd=REPO, timeout=60
    )


def test_it_prints_lint_warnings_per_node_on_validate(tmp_path: Path) -> None:
    pack = write_chain_pack(tmp_path / "pack", nodes=2)
    proc = pf("validate", str(pack), "--endpoint", "openai:http://127.0.0.1:9/v1#m;grammar=json_object")
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stdout.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: node '{n}': grammars/{n}.json /properties/{n}_stars: '{k}' is not enforced by "
        f"grammar=json_object; only verification holds it"
        for n in ("n1", "n2")
        for k in ("minimum", "maximum")
    ]
    clean = pf("validate", str(pack), "--endpoint", "openai:http://127.0.0.1:9/v1#m;grammar=json_schema")
    assert "schema lint: no warnings" in clean.stdout


def test_it_refuses_to_lint_against_a_scripted_model(tmp_path: Path) -> None:
    proc = pf("validate", str(write_chain_pack(tmp_path / "pack")), "--endpoint", "fake:x.json")
    assert proc.returncode == 2 and "applies to openai: endpoints" in proc.stderr
