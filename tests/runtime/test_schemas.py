"""One regular-expression engine for what a pack or a spec supplies (runtime.regex,
runtime.schemas): every pattern a grammar holds is matched by RE2, in linear time; a
pattern RE2 refuses is a load error at its file and JSON path; and no other module
validates a schema with jsonschema's own (Python `re`) validator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from jsonschema import Draft202012Validator

from runtime import (
    OutputRejected,
    PackInvalid,
    PatternRefused,
    check_schema,
    compile_pattern,
    load_pack,
    schema_validator,
)
from runtime.verify import verify_answer
from tests.support.runtime_packs import write_pack

ROOT = Path(__file__).resolve().parents[2]
BACKTRACKS = "^(a|a)*b$"  # exponential in Python's re: 27 a's took about 40 s


class NoPythonRe:
    """Stands in for the `re` module inside jsonschema: any use fails the test."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"jsonschema used Python's re.{name}")


@pytest.fixture
def no_python_re(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in (jsonschema._keywords, jsonschema._utils):
        monkeypatch.setattr(module, "re", NoPythonRe())


def test_a_backtracking_pattern_is_matched_by_re2_not_python_re(no_python_re: None) -> None:
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": BACKTRACKS}}}
    validator = schema_validator(schema)
    assert not validator.is_valid({"code": "a" * 10_000})  # linear: 10,000 a's, then no b
    assert validator.is_valid({"code": "a" * 10_000 + "b"})
    errors = list(validator.iter_errors({"code": "aaa"}))
    assert [list(e.absolute_path) for e in errors] == [["code"]] and "does not match" in errors[0].message


def test_the_verifier_checks_a_grammars_pattern_with_re2(tmp_path: Path, no_python_re: None) -> None:
    grammar = {
        "type": "object",
        "required": ["code"],
        "properties": {"code": {"type": "string", "pattern": BACKTRACKS}},
    }
    root = write_pack(
        tmp_path / "p",
        nodes={"a": {"kind": "generate", "writes": ["code"]}, "done": {"kind": "end"}},
        edges=[{"from": "a", "to": "done"}],
        grammars={"a": grammar},
    )
    node = load_pack(root).nodes["a"]
    with pytest.raises(OutputRejected) as refused:
        verify_answer(node, {"code": "a" * 27}, {}, {})
    assert refused.value.category == "schema"
    assert verify_answer(node, {"code": "a" * 27 + "b"}, {}, {}) == {"code": "a" * 27 + "b"}


@pytest.mark.parametrize(
    ("instance", "valid"),
    [
        ({"x-a": 1, "name": "n"}, True),
        ({"x-a": "one", "name": "n"}, False),  # a patternProperties subschema applies
        ({"other": 1, "name": "n"}, False),  # additionalProperties: false, no pattern covers it
        ({"name": 3}, False),
    ],
)
def test_pattern_properties_and_additional_properties_agree_with_jsonschema(
    instance: dict[str, Any], valid: bool
) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "patternProperties": {"^x-[a-z]+$": {"type": "integer"}},
        "additionalProperties": False,
        "propertyNames": {"pattern": "^[a-z-]+$"},
    }
    assert Draft202012Validator(schema).is_valid(instance) is valid  # the reference, on an RE2-safe pattern
    assert schema_validator(schema).is_valid(instance) is valid


def test_property_names_patterns_go_through_re2(no_python_re: None) -> None:
    schema = {"type": "object", "propertyNames": {"pattern": BACKTRACKS}}
    assert not schema_validator(schema).is_valid({"a" * 5_000: 1})


@pytest.mark.parametrize(
    ("schema", "where", "says"),
    [
        (
            {"type": "object", "properties": {"code": {"type": "string", "pattern": "(?=a)a"}}},
            "properties/code/pattern",
            "lookaround is not supported",
        ),
        ({"type": "object", "patternProperties": {"(a)\\1": {}}}, "patternProperties/(a)\\1", "backreferences"),
        (
            {"type": "object", "patternProperties": {"^a": {}}, "unevaluatedProperties": False},
            "patternProperties",
            "unevaluatedProperties beside patternProperties",
        ),
    ],
)
def test_a_pattern_re2_refuses_is_a_load_error_at_its_file_and_json_path(
    tmp_path: Path, schema: dict[str, Any], where: str, says: str
) -> None:
    root = write_pack(
        tmp_path / "p", nodes={"a": {"kind": "generate", "writes": ["code"]}}, edges=[], grammars={"a": schema}
    )
    with pytest.raises(PackInvalid) as refused:
        load_pack(root)
    found = [str(i) for i in refused.value.issues]
    assert any(i.startswith(f"grammars/a.json: invalid JSON Schema at {where}: ") and says in i for i in found), found


def test_check_schema_and_compile_pattern_refuse_what_re2_refuses() -> None:
    with pytest.raises(jsonschema.SchemaError):
        check_schema({"type": "string", "pattern": "(?<=x)y"})
    with pytest.raises(PatternRefused, match="lookaround"):
        compile_pattern("(?!x)")
    check_schema({"type": "string", "pattern": "^[A-Z]{2}-\\d+$", "enum": ["(?=not a pattern)"]})  # enum is data


def test_no_other_module_validates_with_jsonschemas_own_validators() -> None:
    allowed = {"runtime/schemas.py"}
    found = []
    for package in ("runtime", "compiler", "studio"):
        for path in (ROOT / package).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            text = path.read_text(encoding="utf-8")
            for needle in (
                "Draft202012Validator(",
                "Draft7Validator(",
                "jsonschema.validate(",
                "validators.validator_for(",
            ):
                if needle in text and rel not in allowed:
                    found.append(f"{rel}: {needle}")
    assert found == [], "validate through runtime.schemas (schema_validator, check_schema): patterns must go to RE2"
    assert json.dumps(found) == "[]"
