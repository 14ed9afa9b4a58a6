"""The one way the runtime and the compiler validate against a JSON Schema: jsonschema's
2020-12 validator with every regular expression a schema holds matched by RE2
(runtime.regex, linear time) instead of Python's backtracking `re`: `pattern`,
`patternProperties` (and so `propertyNames` and `additionalProperties`, which read
them). A pattern RE2 refuses is found before anything is validated (`pattern_problems`:
the loader refuses the grammar with its file and JSON path).

`unevaluatedProperties` beside `patternProperties` is refused too: jsonschema decides
which properties a pattern evaluated with Python's `re`, in code this module does not
replace.

`schema_validator(schema)` is the validator; `check_schema(schema)` checks a schema against the
metaschema and its patterns. tests/runtime/test_schemas.py keeps every other module off
jsonschema's own validator classes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError

from runtime.regex import PatternRefused, compile_pattern, search


def _pattern(validator: Any, pattern: str, instance: Any, schema: Mapping[str, Any]) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """The properties neither `properties` nor a `patternProperties` pattern covers."""
    named = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    return [k for k in instance if k not in named and not any(search(p, k) for p in patterns)]


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    extras = _additional(instance, schema)
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(e) for e in sorted(extras))
            patterns = ", ".join(repr(p) for p in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {patterns}")
        else:
            listed = ", ".join(repr(e) for e in extras)
            was = "was" if len(extras) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed ({listed} {was} unexpected)")


Validator: Any = validators.extend(  # type: ignore[no-untyped-call]  # jsonschema leaves extend untyped
    Draft202012Validator,
    {"pattern": _pattern, "patternProperties": _pattern_properties, "additionalProperties": _additional_properties},
)


def schema_validator(schema: Mapping[str, Any]) -> Any:
    """A validator of `schema` whose patterns are matched by RE2."""
    return Validator(schema)


def pattern_problems(schema: Any, path: tuple[str | int, ...] = ()) -> list[tuple[tuple[str | int, ...], str]]:
    """(JSON path, why) of each regular expression in `schema` RE2 refuses, and of each
    `unevaluatedProperties` beside `patternProperties`."""
    found: list[tuple[tuple[str | int, ...], str]] = []
    if isinstance(schema, list):
        for i, item in enumerate(schema):
            found += pattern_problems(item, (*path, i))
        return found
    if not isinstance(schema, Mapping):
        return found
    for key, value in schema.items():
        here = (*path, key)
        if key == "pattern" and isinstance(value, str):
            found += _refused(value, here)
        elif key == "patternProperties" and isinstance(value, Mapping):
            for pattern, sub in value.items():
                found += _refused(pattern, (*here, pattern))
                found += pattern_problems(sub, (*here, pattern))
            if "unevaluatedProperties" in schema:
                found.append((here, "unevaluatedProperties beside patternProperties is not supported"))
        elif key not in ("enum", "const", "default", "examples"):  # data, not schema
            found += pattern_problems(value, here)
    return found


def _refused(pattern: str, path: tuple[str | int, ...]) -> list[tuple[tuple[str | int, ...], str]]:
    try:
        compile_pattern(pattern)
    except PatternRefused as exc:
        return [(path, str(exc))]
    return []


def check_schema(schema: Mapping[str, Any]) -> None:
    """SchemaError when `schema` is not a 2020-12 schema, or holds a pattern RE2 refuses
    (the first one, with its JSON path)."""
    Draft202012Validator.check_schema(schema)
    problems = pattern_problems(schema)
    if problems:
        path, why = problems[0]
        raise SchemaError(why, path=path)
