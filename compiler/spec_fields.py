"""spec.yaml's `inputs:` and `outputs:` (each field's description, type, values and
compare rule, a host scorer's included), and the JSON helpers the loader checks gold
values with. `FieldReader` is the base of the spec reader (compiler/spec_keys.py): it
owns the issue list, the source map (so every problem lands at its key's line) and the
host's scorer registry, when the spec is loaded with one."""

from __future__ import annotations

import keyword
import math
from collections.abc import Collection, Mapping
from typing import Any

from compiler.spec_types import FIELD_KEYS, FIELD_NAME, FIELD_TYPES, RESERVED, FieldSpec
from runtime import COMPARES, FieldRule, PackIssue, Scorer, SourceMap, nearest_key

SCORER = "scorer:"  # compare: scorer:NAME, a host scorer (runtime.scorers)


class FieldReader:
    """Reads the field sections of spec.yaml; each problem becomes an issue at its key's line."""

    def __init__(self, src: SourceMap, issues: list[PackIssue], scorers: Mapping[str, Scorer] | None = None) -> None:
        self.src = src
        self.issues = issues
        self.scorers = scorers  # the host's scorer registry: `scorer:NAME` is checked against it (None: unchecked)

    def error(self, message: str, *path: str | int, kind: str = "value") -> None:
        self.issues.append(self.src.issue(message, *path, kind=kind))

    def unknown_keys(self, body: Mapping[str, Any], valid: Collection[str], what: str, *path: str | int) -> None:
        for key in body:
            if key not in valid:
                self.error(f"{what}: unknown key '{key}'; {nearest_key(key, valid)}", *path, key, kind="unknown_key")

    def fields(self, doc: dict[str, Any] | None, key: str) -> tuple[dict[str, FieldSpec], set[str] | None]:
        """The declared fields, and the set of names declared (None when the section
        could not be read at all, so gold cases are not checked against it)."""
        if doc is None:
            return {}, None
        if key not in doc:
            self.error(f"'{key}' is required: map each field name to {{description: ...}}", kind="missing")
            return {}, None
        body = doc[key]
        if not isinstance(body, dict) or not body:
            self.error(f"'{key}' must map each field name to {{description: ..., type: ...}}", key)
            return {}, None
        found: dict[str, FieldSpec] = {}
        for name, entry in body.items():
            at = (key, name)
            problem = field_name_problem(name)
            if problem:
                self.error(f"{key}.{name}: {problem}", *at)
                continue
            if not isinstance(entry, dict):
                self.error(f"{key}.{name} must be a mapping {{description: ..., type: ...}}", *at)
                continue
            self.unknown_keys(entry, FIELD_KEYS, f"{key}.{name}", *at)
            description = entry.get("description")
            if not isinstance(description, str) or not description.strip():
                self.error(f"{key}.{name} needs a description: what the field holds, in words", *at, "description")
                description = None
            type_ = entry.get("type")
            if type_ is not None and type_ not in FIELD_TYPES:
                self.error(f"{key}.{name}.type must be one of: {', '.join(FIELD_TYPES)}", *at, "type")
                type_ = None
            values = self.values(entry, type_, *at) if "values" in entry else None
            compare = self.compare(entry, *at)
            if description is not None:
                # A declared array's values are its item set; an untyped field's are too
                # when gold shows lists (decided once the gold cases are read).
                found[name] = FieldSpec(name, description, type_, values, compare, item_set=type_ == "array")
        return found, {n for n in body if isinstance(n, str)}

    def values(self, entry: dict[str, Any], type_: str | None, key: str, name: str) -> tuple[Any, ...] | None:
        """A field's `values`: a non-empty list of distinct non-null values of its type
        (of any type for an array field: they are its items)."""
        value = entry["values"]
        where = f"{key}.{name}.values"
        if not isinstance(value, list) or not value:
            what = "allowed items (the field is an array)" if type_ == "array" else "allowed values"
            self.error(f"{where} must be a non-empty list of the field's {what}", key, name, "values")
            return None
        ok = True
        for i, item in enumerate(value):
            if item is None:
                self.error(
                    f"{where}[{i}] is null; list the non-null values only (gold shows whether null is allowed)",
                    key,
                    name,
                    "values",
                    i,
                )
                ok = False
            elif type_ not in (None, "array") and not is_type(item, type_):
                self.error(
                    f"{where}[{i}] is {json_kind(item)}, but {key}.{name} is declared {type_}", key, name, "values", i
                )
                ok = False
            elif any(same_json(item, other) for other in value[:i]):
                self.error(f"{where}[{i}] {item!r} is listed twice; keep one", key, name, "values", i)
                ok = False
        return tuple(value) if ok else None

    def compare(self, entry: dict[str, Any], key: str, name: str) -> FieldRule | None:
        """A field's `compare` (+ `tolerance`; a host scorer's + `options` and `pass`),
        checked like the manifest's `fields:` rules (docs/pack-format.md, "fields")."""
        given = [k for k in ("compare", "tolerance", "options", "pass") if entry.get(k) is not None]
        if not given:
            return None
        where = f"{key}.{name}"
        if key == "inputs":
            bad = given[0]
            self.error(f"{where}.{bad}: inputs are not compared (only outputs are); remove it", key, name, bad)
            return None
        compare, tolerance = entry.get("compare"), entry.get("tolerance")
        if compare is None:
            compare = "exact"
        if isinstance(compare, str) and compare.startswith(SCORER):
            return self.scorer(entry, compare.removeprefix(SCORER), key, name)
        for extra in ("options", "pass"):
            if extra in given:
                self.error(f"{where}.{extra} applies to compare: scorer:NAME only; remove it", key, name, extra)
                return None
        if compare not in COMPARES:
            self.error(
                f"{where}.compare: unknown compare {compare!r}; use one of: {', '.join(COMPARES)}, "
                "or scorer:NAME (a scorer the host registers)",
                key,
                name,
                "compare",
            )
            return None
        if tolerance is not None:
            if compare != "number":
                self.error(
                    f"{where}.tolerance applies to compare: number only, not {compare!r}; remove it",
                    key,
                    name,
                    "tolerance",
                )
                return None
            if not is_number(tolerance) or tolerance < 0:
                self.error(f"{where}.tolerance must be a number >= 0, got {tolerance!r}", key, name, "tolerance")
                return None
        return FieldRule(str(compare), float(tolerance or 0.0))

    def scorer(self, entry: dict[str, Any], scorer: str, key: str, name: str) -> FieldRule | None:
        """`compare: scorer:NAME` with its `options` (a mapping: the scorer's keyword
        arguments) and `pass` (the score from 0 to 1 that passes; default 1). NAME is
        checked against the host's registry when the spec is loaded with one."""
        where, before = f"{key}.{name}", len(self.issues)
        if not scorer:
            self.error(f"{where}.compare: 'scorer:' needs the scorer's name (scorer:NAME)", key, name, "compare")
        elif self.scorers is not None and scorer not in self.scorers:
            known = ", ".join(sorted(self.scorers)) or "none"
            message = f"{where}.compare: unknown scorer '{scorer}'; the host registers: {known}"
            self.error(message, key, name, "compare", kind="reference")
        options = entry.get("options")
        options = {} if options is None else options
        if not isinstance(options, dict) or not all(isinstance(k, str) for k in options):
            self.error(f"{where}.options must be a mapping of option name to value", key, name, "options")
        passing = entry.get("pass")
        passing = 1.0 if passing is None else passing
        if not is_number(passing) or not 0 <= passing <= 1:
            self.error(f"{where}.pass must be a score from 0 to 1, got {passing!r}", key, name, "pass")
        if entry.get("tolerance") is not None:
            message = f"{where}.tolerance applies to compare: number only; give the scorer an option"
            self.error(message, key, name, "tolerance")
        if len(self.issues) > before:
            return None
        return FieldRule(
            "scorer",
            scorer=scorer,
            options=tuple(sorted(options.items())),
            pass_at=float(passing),
            function=self.scorers.get(scorer) if self.scorers is not None else None,
            name=name,
        )


def field_name_problem(name: Any) -> str | None:
    if not isinstance(name, str) or not FIELD_NAME.fullmatch(name):
        return "a field name is letters, digits and '_', not starting with a digit"
    if keyword.iskeyword(name) or name in RESERVED:
        return f"'{name}' is a word of the expression language; pick another name"
    return None


def is_number(value: Any) -> bool:
    """A finite JSON number (a boolean is not one)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def is_type(value: Any, type_: str) -> bool:
    """JSON Schema's meaning of `type_`, with null always allowed."""
    if value is None:
        return True
    if type_ == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if type_ == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    kinds: dict[str, type | tuple[type, ...]] = {"string": str, "boolean": bool, "array": list, "object": dict}
    return isinstance(value, kinds[type_])


def same_json(a: Any, b: Any) -> bool:
    """JSON equality: 1 equals 1.0, a boolean never equals a number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def json_kind(value: Any) -> str:
    for kind, types in (("a boolean", bool), ("a number", int | float), ("a string", str), ("an array", list)):
        if isinstance(value, types):
            return kind
    return "an object" if isinstance(value, dict) else type(value).__name__
