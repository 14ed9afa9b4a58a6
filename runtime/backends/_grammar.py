"""JSON schema -> GBNF, for llama.cpp's `grammar` field (`grammar=gbnf` endpoints).

Covers what a pack's answer schema needs: object (properties in declared order,
required and optional), enum, const, string (minLength/maxLength), number, integer
(small bounded ranges, or minimum >= 0), boolean, null, array (items,
minItems/maxItems), type lists, anyOf/oneOf, local $ref. Whatever cannot be expressed
is left out of the grammar and reported in `Grammar.ignored`, so the schema lint can
tell the pack's author that only verification holds it. The grammar never admits
more than JSON; where it is looser than the schema, verification rejects the answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Keywords that only annotate or that the grammar enforces by construction.
_HANDLED = frozenset(
    {
        "type",
        "properties",
        "required",
        "enum",
        "const",
        "items",
        "anyOf",
        "oneOf",
        "$ref",
        "$defs",
        "definitions",
        "$schema",
        "$id",
        "$comment",
        "title",
        "description",
        "default",
        "examples",
        "additionalProperties",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
    }
)
_ENUMERATE_LIMIT = 1000  # integer ranges up to this size become alternatives
_REPEAT_LIMIT = 200  # bounded repetitions above this are left open

_PRIMITIVES = {
    "ws": "[ ]?",
    "char": r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})',
    "string": r'"\"" char* "\""',
    "int": '"-"? ("0" | [1-9] [0-9]{0,15})',
    "nat": '"0" | [1-9] [0-9]{0,15}',
    "number": '"-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?',
    "boolean": '"true" | "false"',
    "null": '"null"',
    "value": "object | array | string | number | boolean | null",
    "object": '"{" ws ( string ":" ws value ("," ws string ":" ws value)* )? ws "}"',
    "array": '"[" ws ( value ("," ws value)* )? ws "]"',
}
# Compact mode: no whitespace anywhere inside the JSON, so no token is spent on it.
_COMPACT = {
    "object": '"{" ( string ":" value ("," string ":" value)* )? "}"',
    "array": '"[" ( value ("," value)* )? "]"',
}
_DEPENDS = {
    "string": ["char"],
    "value": ["object", "array", "string", "number", "boolean", "null"],
    "object": ["ws", "string", "value"],
    "array": ["ws", "value"],
}
_DEPENDS_COMPACT = {**_DEPENDS, "object": ["string", "value"], "array": ["value"]}


@dataclass
class Grammar:
    text: str
    ignored: list[tuple[str, str]] = field(default_factory=list)  # (schema path, keyword)


def literal(value: str) -> str:
    """A GBNF string literal matching `value` exactly."""
    out = []
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _json_literal(value: Any) -> str:
    return literal(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _whole(value: Any) -> int | None:
    """An integer bound, or None when absent or not a whole number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    return value


def _repeat(rule: str, low: int, high: int | None) -> str:
    if high is None:
        return f"{rule}{{{low},}}" if low else f"{rule}*"
    return f"{rule}{{{low},{high}}}"


def opening(schema: Any, given: Mapping[str, Any] | None = None) -> str | None:
    """The text every answer to `schema` starts with that an endpoint with `prefill=true`
    writes ahead of the model: `{"` and the first property's name, without its closing
    quote, when the answer is an object whose first declared property is required (the
    grammar writes properties in declared order). None for any other schema.

    `given`: members the answer already holds (a quorum's settled fields, which `schema`
    leaves out: runtime.nodes.sure_fields), written first, compact, in their order, so
    the model writes the rest after them as it would after its own values.

    The name's closing quote is left to the model: in common tokenizers it joins the
    punctuation after it (`":`, `":"`, `":[`), so ending the written part before it
    leaves the model the tokens it would have chosen itself."""
    if not isinstance(schema, dict) or any(k in schema for k in ("$ref", "anyOf", "oneOf", "const", "enum")):
        return None
    kind = schema.get("type", "object" if "properties" in schema else None)
    props, required = schema.get("properties"), schema.get("required")
    if kind != "object" or not isinstance(props, dict) or not props or not isinstance(required, list):
        return None
    first = next(iter(props))
    if first not in required:
        return None
    members = "".join(f"{_compact(name)}:{_compact(value)}," for name, value in (given or {}).items())
    return "{" + members + _compact(first)[:-1]


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class _Converter:
    def __init__(self, root: dict[str, Any], compact: bool = False, opened: bool = False) -> None:
        self.root = root
        self.compact = compact
        self.opened = opened  # the root rule matches the rest of the answer after `opening(root)`
        self.ws = "" if compact else "ws "  # what may stand between JSON tokens
        self.rules: dict[str, str] = {}
        self.used: set[str] = set()
        self.ignored: list[tuple[str, str]] = []
        self.refs: dict[str, str] = {}

    def name(self, hint: str) -> str:
        base = re.sub(r"[^a-zA-Z0-9-]+", "-", hint).strip("-").lower() or "r"
        candidate, n = base, 1
        while candidate in self.rules or candidate in _PRIMITIVES:
            n += 1
            candidate = f"{base}-{n}"
        self.rules[candidate] = ""  # reserve
        return candidate

    def prim(self, rule: str) -> str:
        stack = [rule]
        while stack:
            r = stack.pop()
            if r not in self.used:
                self.used.add(r)
                stack.extend((_DEPENDS_COMPACT if self.compact else _DEPENDS).get(r, []))
        return rule

    def ignore(self, path: str, keyword: str) -> None:
        self.ignored.append((path or "/", keyword))

    def visit(self, schema: Any, path: str, hint: str) -> str:
        """Return a GBNF expression matching `schema` (adds named rules as needed)."""
        if schema is True or schema == {} or not isinstance(schema, dict):
            if schema is False:
                self.ignore(path, "false")
            return self.prim("value")
        for key in schema:
            if key not in _HANDLED:
                self.ignore(path, key)
        if "$ref" in schema:
            return self.ref(schema["$ref"], path)
        if "const" in schema:
            return _json_literal(schema["const"])
        if "enum" in schema and isinstance(schema["enum"], list):
            return "(" + " | ".join(_json_literal(v) for v in schema["enum"]) + ")"
        for combinator in ("anyOf", "oneOf"):
            if isinstance(schema.get(combinator), list):
                if combinator == "oneOf":
                    self.ignore(path, "oneOf (exclusivity)")
                alts = [
                    self.visit(s, f"{path}/{combinator}/{i}", f"{hint}-{i}") for i, s in enumerate(schema[combinator])
                ]
                return "(" + " | ".join(alts) + ")"
        kind = schema.get("type")
        if kind is None:
            kind = "object" if "properties" in schema else ("array" if "items" in schema else None)
        if isinstance(kind, list):
            alts = [self.typed(t, schema, path, f"{hint}-{t}") for t in kind]
            return "(" + " | ".join(alts) + ")"
        if kind is None:
            return self.prim("value")
        return self.typed(str(kind), schema, path, hint)

    def typed(self, kind: str, schema: dict[str, Any], path: str, hint: str) -> str:
        if kind == "object":
            return self.object(schema, path, hint)
        if kind == "array":
            return self.array(schema, path, hint)
        if kind == "string":
            return self.string(schema, path, hint)
        if kind == "integer":
            return self.integer(schema, path, hint)
        if kind == "number":
            for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
                if k in schema:
                    self.ignore(path, k)
            return self.prim("number")
        if kind in ("boolean", "null"):
            return self.prim(kind)
        self.ignore(path, f"type={kind}")
        return self.prim("value")

    def string(self, schema: dict[str, Any], path: str, hint: str) -> str:
        low, high = schema.get("minLength", 0), schema.get("maxLength")
        if not isinstance(low, int) or (high is not None and not isinstance(high, int)):
            return self.prim("string")
        if high is not None and high > _REPEAT_LIMIT:
            self.ignore(path, "maxLength")
            high = None
        if low > _REPEAT_LIMIT:
            self.ignore(path, "minLength")
            low = 0
        if low == 0 and high is None:
            return self.prim("string")
        self.prim("char")
        rule = self.name(hint)
        self.rules[rule] = f'"\\"" {_repeat("char", low, high)} "\\""'
        return rule

    def integer(self, schema: dict[str, Any], path: str, hint: str) -> str:
        low = _whole(schema.get("minimum"))
        high = _whole(schema.get("maximum"))
        ex_low = _whole(schema.get("exclusiveMinimum"))
        ex_high = _whole(schema.get("exclusiveMaximum"))
        if ex_low is not None:
            low = ex_low + 1 if low is None else max(low, ex_low + 1)
        if ex_high is not None:
            high = ex_high - 1 if high is None else min(high, ex_high - 1)
        if low is not None and high is not None and 0 <= high - low < _ENUMERATE_LIMIT:
            return "(" + " | ".join(f'"{n}"' for n in range(low, high + 1)) + ")"
        if low is not None and low >= 0 and high is None:
            if low > 0:
                self.ignore(path, "minimum")
            return self.prim("nat")
        for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if k in schema:
                self.ignore(path, k)
        return self.prim("int")

    def array(self, schema: dict[str, Any], path: str, hint: str) -> str:
        item = self.visit(schema.get("items", {}), f"{path}/items", f"{hint}-item")
        low, high = schema.get("minItems", 0), schema.get("maxItems")
        if not isinstance(low, int) or low > _REPEAT_LIMIT:
            self.ignore(path, "minItems")
            low = 0
        if high is not None and (not isinstance(high, int) or high > _REPEAT_LIMIT):
            self.ignore(path, "maxItems")
            high = None
        ws = self.ws
        if ws:
            self.prim("ws")
        rule = self.name(hint)
        if high == 0:
            self.rules[rule] = f'"[" {ws}"]"'
            return rule
        rest = _repeat(f'("," {ws}{item})', max(0, low - 1), None if high is None else high - 1)
        items = f"{item} {rest}"
        self.rules[rule] = f'"[" {ws}{items} {ws}"]"' if low >= 1 else f'"[" {ws}( {items} )? {ws}"]"'
        return rule

    def object(self, schema: dict[str, Any], path: str, hint: str) -> str:
        props = schema.get("properties")
        if not isinstance(props, dict) or not props:
            return self.prim("object")
        required = set(schema.get("required", []))
        ws = self.ws
        if ws:
            self.prim("ws")
        names = list(props)
        pairs = []
        for key in names:
            value = self.visit(props[key], f"{path}/properties/{key}", f"{hint}-{key}")
            pairs.append(f'{_json_literal(key)} ":" {ws}{value}')
        for key in required - set(names):
            self.ignore(path, f"required ({key} has no properties entry)")
        # after[i]: properties i.. that may follow one already written, each with its comma.
        after = [""] * (len(names) + 1)
        for i in range(len(names) - 1, -1, -1):
            part = f'"," {ws}{pairs[i]}'
            part = part if names[i] in required else f"( {part} )?"
            after[i] = f"{part} {after[i + 1]}".strip()
        # The first property written is j, where every property before j is optional.
        firsts = []
        for j, key in enumerate(names):
            firsts.append(f"{pairs[j]} {after[j + 1]}".strip())
            if key in required:
                break
        else:
            firsts.append("")  # every property optional: {} is allowed
        rule = self.name(hint)
        if self.opened and path == "":
            # What follows `opening(schema)`: the first name's closing quote, its value, the rest.
            value = pairs[0].removeprefix(f'{_json_literal(names[0])} ":" ')
            self.rules[rule] = " ".join(part for part in ('"\\"" ":"', value, after[1], f'{ws}"}}"') if part)
            return rule
        body = " | ".join(f"( {f} )" if f else '""' for f in firsts)
        self.rules[rule] = f'"{{" {ws}( {body} ) {ws}"}}"'
        return rule

    def ref(self, ref: Any, path: str) -> str:
        if not isinstance(ref, str) or not ref.startswith("#/"):
            self.ignore(path, "$ref (not local)")
            return self.prim("value")
        if ref in self.refs:
            return self.refs[ref]
        target: Any = self.root
        for part in ref[2:].split("/"):
            if not isinstance(target, dict) or part not in target:
                self.ignore(path, f"$ref ({ref} not found)")
                return self.prim("value")
            target = target[part]
        rule = self.name("ref-" + ref.rsplit("/", 1)[-1])
        self.refs[ref] = rule
        self.rules[rule] = self.visit(target, ref[1:], rule)
        return rule


def schema_to_gbnf(schema: dict[str, Any], compact: bool = False, opened: bool = False) -> Grammar:
    """Convert `schema` to a GBNF grammar whose `root` rule is the answer.

    `compact`: no whitespace between JSON tokens (`{"a":1,"b":[2,3]}`), so a model spends
    no token on layout; otherwise one optional space may follow `{`, `[`, `:` and `,`
    and precede `}` and `]`. `opened`: the root rule matches what follows `opening(schema)`
    (ValueError when the schema has none)."""
    if opened and opening(schema) is None:
        raise ValueError("the schema has no opening to write ahead of the model (see opening())")
    conv = _Converter(schema, compact, opened)
    top = conv.visit(schema, "", "root")
    if top != "root":
        conv.rules.pop("root", None)
        lines = [f"root ::= {top}"]
    else:
        lines = []
    lines += [f"{name} ::= {body}" for name, body in conv.rules.items()]
    table = {**_PRIMITIVES, **_COMPACT} if compact else _PRIMITIVES
    lines += [f"{name} ::= {table[name]}" for name in table if name in conv.used]
    return Grammar("\n".join(lines) + "\n", conv.ignored)
