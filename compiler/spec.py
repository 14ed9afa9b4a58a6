"""A spec folder: what a pack must do (`spec.yaml`) and the cases it must pass (`gold.jsonl`).

Loaded as strictly as a pack (runtime's load_pack): every problem at once, each a runtime
PackIssue naming its file and line and saying what to do; unknown keys are refused with a
"did you mean". The YAML source map, the evalset line parser and the expression compiler
are the runtime's own, so a spec and a pack report the same mistake in the same words.

The gold file's exact bytes are kept (`Spec.gold_bytes`): they become the pack's
evalset.jsonl byte for byte, and no compiler step edits, drops or reorders a case
(invariant 6). docs/compiler.md, "The spec", is the format reference."""

from __future__ import annotations

import keyword
import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compiler.errors import SpecInvalid
from runtime import (
    COMPARES,
    BadSpec,
    Case,
    ExprError,
    Expression,
    FieldRule,
    PackIssue,
    SourceMap,
    compile_expr,
    load_yaml,
    nearest_key,
    parse_backend_spec,
    parse_evalset,
)

SPEC_FILE = "spec.yaml"
GOLD_FILE = "gold.jsonl"
SPEC_KEYS = frozenset(
    {"name", "task", "inputs", "outputs", "tools", "rules", "unsure_end", "model", "budgets", "train"}
)
FIELD_KEYS = frozenset({"description", "type", "values", "compare", "tolerance"})
RULE_KEYS = frozenset({"text", "expr"})
BUDGET_KEYS = frozenset({"attempts", "planner_tokens", "cost_usd"})
# A declared type names the JSON type of a field's non-null values (null is always
# allowed: whether a field may be null is induced from the gold cases).
FIELD_TYPES = ("string", "number", "integer", "boolean", "array", "object")
# Fields become state fields and expression names: plain identifiers, none of the
# expression language's own words.
_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RESERVED = frozenset({"input", "true", "false", "null"})
_NODE_ID = re.compile(r"[a-z0-9_]+")


@dataclass(frozen=True)
class FieldSpec:
    """One input or output: its name, what it holds in words, and optionally its JSON type."""

    name: str
    description: str
    type: str | None = None
    # `values`: the closed set of the field's allowed non-null values, as the author
    # states it (gold may show only some); `compare`: how the evalset compares it (the
    # pack manifest's `fields:` rule; outputs only).
    values: tuple[Any, ...] | None = None
    compare: FieldRule | None = None


@dataclass(frozen=True)
class Rule:
    """A rule in words, and optionally as an expression over outputs and `input.<name>`."""

    text: str
    expr: str | None = None


@dataclass(frozen=True)
class Budgets:
    """What one compile may spend: attempts (plan -> emit -> evaluate rounds), planner
    tokens (prompt + completion, all attempts together) and dollars."""

    attempts: int = 5
    planner_tokens: int = 200_000
    cost_usd: float = 5.0


@dataclass(frozen=True)
class GoldCase:
    """One line of gold.jsonl (the evalset's line format); `line` is its 1-based line.
    `human` holds the answers a person gives at the unsure end, when the case has them."""

    id: str
    input: dict[str, Any]
    expected: dict[str, Any]
    path: tuple[str, ...] | None
    end: str | None
    tags: tuple[str, ...]
    line: int
    human: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Spec:
    """A loaded spec folder. Build with `load_spec`."""

    root: Path
    name: str
    task: str
    inputs: dict[str, FieldSpec]
    outputs: dict[str, FieldSpec]
    tools: tuple[str, ...]
    rules: tuple[Rule, ...]
    unsure_end: str | None
    model: str | None
    budgets: Budgets
    gold: tuple[GoldCase, ...]
    gold_bytes: bytes
    train: str | None = None  # gold cases with this tag are the train split (few-shot examples)

    def declared_values(self) -> dict[str, list[Any]]:
        """The outputs that declare `values`: name -> the allowed non-null values."""
        return {name: list(f.values) for name, f in self.outputs.items() if f.values is not None}

    def compare_rules(self) -> dict[str, FieldRule]:
        """The outputs that declare `compare`: name -> their rule."""
        return {name: f.compare for name, f in self.outputs.items() if f.compare is not None}


def load_spec(root: str | Path) -> Spec:
    """Load and check the spec folder at `root` (spec.yaml + gold.jsonl). Raises
    SpecInvalid listing every issue, each naming its file and line."""
    root = Path(root)
    if not root.is_dir():
        raise SpecInvalid(
            [PackIssue(str(root), f"not a spec folder; it must hold {SPEC_FILE} and {GOLD_FILE}", kind="missing")]
        )
    issues: list[PackIssue] = []
    src = SourceMap(SPEC_FILE)
    doc = _document(_read(root, SPEC_FILE, issues, "every spec has one: name, task, inputs, outputs"), src, issues)
    spec = _Reader(src, issues)
    for key in doc or {}:
        if key not in SPEC_KEYS:
            spec.error(f"unknown key '{key}'; {nearest_key(key, SPEC_KEYS)}", key, kind="unknown_key")
    name = spec.text(doc, "name")
    task = spec.text(doc, "task")
    inputs, input_names = spec.fields(doc, "inputs")
    outputs, output_names = spec.fields(doc, "outputs")
    tools = spec.tools(doc)
    rules = spec.rules(doc, input_names, output_names)
    unsure_end = spec.unsure_end(doc)
    model = spec.model(doc)
    budgets = spec.budgets(doc)
    train = spec.train(doc)

    gold_bytes = _read_bytes(root, GOLD_FILE, issues, "every spec has gold cases, one JSON object per line")
    gold: list[GoldCase] = []
    if gold_bytes is not None:
        gold = _gold(gold_bytes, issues, inputs, input_names, outputs, output_names, unsure_end)
        _check_rules(rules, gold, unsure_end, src, issues)
        _check_train(train, gold, src, issues)
    if issues:
        raise SpecInvalid(issues)
    assert name is not None and task is not None and gold_bytes is not None  # each would be an issue
    return Spec(
        root=root,
        name=name,
        task=task,
        inputs=inputs,
        outputs=outputs,
        tools=tools,
        rules=tuple(rule for rule, _ in rules),
        unsure_end=unsure_end,
        model=model,
        budgets=budgets,
        gold=tuple(gold),
        gold_bytes=gold_bytes,
        train=train,
    )


# -- spec.yaml --------------------------------------------------------------------------------


def _read_bytes(root: Path, rel: str, issues: list[PackIssue], why: str) -> bytes | None:
    path = root / rel
    if not path.is_file():
        issues.append(PackIssue(rel, f"missing file: {why}; create it", kind="missing"))
        return None
    return path.read_bytes()


def _decode(data: bytes, rel: str, issues: list[PackIssue]) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        issues.append(PackIssue(rel, f"not UTF-8 text (byte {exc.start}); save it as UTF-8", kind="syntax"))
        return None


def _read(root: Path, rel: str, issues: list[PackIssue], why: str) -> str | None:
    data = _read_bytes(root, rel, issues, why)
    return None if data is None else _decode(data, rel, issues)


def _document(text: str | None, src: SourceMap, issues: list[PackIssue]) -> dict[str, Any] | None:
    if text is None:
        return None
    before = len(issues)
    value = load_yaml(text, src, issues)
    if len(issues) > before:
        return None
    if not isinstance(value, dict):
        issues.append(src.issue(f"{SPEC_FILE} must be a mapping with name, task, inputs and outputs"))
        return None
    return value


class _Reader:
    """Reads the parts of spec.yaml; each problem becomes an issue at its key's line."""

    def __init__(self, src: SourceMap, issues: list[PackIssue]) -> None:
        self.src = src
        self.issues = issues

    def error(self, message: str, *path: str | int, kind: str = "value") -> None:
        self.issues.append(self.src.issue(message, *path, kind=kind))

    def unknown_keys(self, body: Mapping[str, Any], valid: Collection[str], what: str, *path: str | int) -> None:
        for key in body:
            if key not in valid:
                self.error(f"{what}: unknown key '{key}'; {nearest_key(key, valid)}", *path, key, kind="unknown_key")

    def text(self, doc: dict[str, Any] | None, key: str) -> str | None:
        if doc is None:
            return None
        if key not in doc:
            self.error(f"'{key}' is required; add it", kind="missing")
            return None
        value = doc[key]
        if not isinstance(value, str) or not value.strip():
            self.error(f"'{key}' must be non-empty text", key)
            return None
        return value.strip() if key == "name" else value

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
            problem = _field_name_problem(name)
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
                found[name] = FieldSpec(name, description, type_, values, compare)
        return found, {n for n in body if isinstance(n, str)}

    def values(self, entry: dict[str, Any], type_: str | None, key: str, name: str) -> tuple[Any, ...] | None:
        """A field's `values`: a non-empty list of distinct non-null values of its type."""
        value = entry["values"]
        where = f"{key}.{name}.values"
        if not isinstance(value, list) or not value:
            self.error(f"{where} must be a non-empty list of the field's allowed values", key, name, "values")
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
            elif type_ is not None and not _is_type(item, type_):
                self.error(
                    f"{where}[{i}] is {_json_kind(item)}, but {key}.{name} is declared {type_}", key, name, "values", i
                )
                ok = False
            elif any(_same_json(item, other) for other in value[:i]):
                self.error(f"{where}[{i}] {item!r} is listed twice; keep one", key, name, "values", i)
                ok = False
        return tuple(value) if ok else None

    def compare(self, entry: dict[str, Any], key: str, name: str) -> FieldRule | None:
        """A field's `compare` (+ `tolerance`), checked like the manifest's `fields:` rules."""
        compare, tolerance = entry.get("compare"), entry.get("tolerance")
        if compare is None and tolerance is None:
            return None
        where = f"{key}.{name}"
        if key == "inputs":
            bad = "compare" if compare is not None else "tolerance"
            self.error(f"{where}.{bad}: inputs are not compared (only outputs are); remove it", key, name, bad)
            return None
        if compare is None:
            compare = "exact"
        if compare not in COMPARES:
            self.error(
                f"{where}.compare: unknown compare {compare!r}; use one of: {', '.join(COMPARES)}", key, name, "compare"
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
            if (
                not isinstance(tolerance, int | float)
                or isinstance(tolerance, bool)
                or not math.isfinite(tolerance)
                or tolerance < 0
            ):
                self.error(f"{where}.tolerance must be a number >= 0, got {tolerance!r}", key, name, "tolerance")
                return None
        return FieldRule(str(compare), float(tolerance or 0.0))

    def tools(self, doc: dict[str, Any] | None) -> tuple[str, ...]:
        value = (doc or {}).get("tools")
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.error("'tools' must be a list of tool names (the host registers them)", "tools")
            return ()
        for i, name in enumerate(value):
            if name in value[:i]:
                self.error(f"tool '{name}' is named twice; keep one", "tools", i)
        return tuple(dict.fromkeys(value))

    def rules(
        self, doc: dict[str, Any] | None, inputs: set[str] | None, outputs: set[str] | None
    ) -> list[tuple[Rule, Expression | None]]:
        value = (doc or {}).get("rules")
        if value is None:
            return []
        if not isinstance(value, list):
            self.error("'rules' must be a list of {text: ..., expr: ...}", "rules")
            return []
        found: list[tuple[Rule, Expression | None]] = []
        for i, entry in enumerate(value):
            at = ("rules", i)
            if not isinstance(entry, dict):
                self.error(f"rules[{i}] must be a mapping {{text: ..., expr: ...}} (expr is optional)", *at)
                continue
            self.unknown_keys(entry, RULE_KEYS, f"rules[{i}]", *at)
            text = entry.get("text")
            if not isinstance(text, str) or not text.strip():
                self.error(f"rules[{i}] needs 'text': the rule in words", *at)
                text = None
            source, expression = entry.get("expr"), None
            if source is not None:
                expression = self.expression(source, inputs, outputs, *at, "expr")
            if text is not None and (source is None or expression is not None):
                found.append((Rule(text, source), expression))
        return found

    def expression(
        self, source: Any, inputs: set[str] | None, outputs: set[str] | None, *at: str | int
    ) -> Expression | None:
        if not isinstance(source, str):
            self.error(f"expected an expression string, got {type(source).__name__}", *at)
            return None
        try:
            expression = compile_expr(source)
        except ExprError as exc:
            self.error(f"bad expression {source!r}: {exc}", *at, kind="syntax")
            return None
        ok = True
        for ref in sorted(expression.references):
            root, _, rest = ref.partition(".")
            if root == "input":
                name = rest.partition(".")[0]
                if not name:
                    self.error("a rule reads input fields one by one: write input.<name>", *at, kind="reference")
                    ok = False
                elif inputs is not None and name not in inputs:
                    hint = nearest_key(name, inputs)
                    self.error(f"'input.{name}' is not a declared input; {hint}", *at, kind="reference")
                    ok = False
            elif outputs is not None and root not in outputs:
                hint = nearest_key(root, outputs)
                self.error(
                    f"'{root}' is not a declared output (a rule reads outputs and input.<name> only); {hint}",
                    *at,
                    kind="reference",
                )
                ok = False
        return expression if ok else None

    def unsure_end(self, doc: dict[str, Any] | None) -> str | None:
        value = (doc or {}).get("unsure_end")
        if value is None:
            return None
        if not isinstance(value, str) or not _NODE_ID.fullmatch(value):
            self.error(
                "'unsure_end' names the end a case goes to when the model cannot decide: "
                "lowercase letters, digits and '_', like needs_review",
                "unsure_end",
            )
            return None
        return value

    def train(self, doc: dict[str, Any] | None) -> str | None:
        value = (doc or {}).get("train")
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            self.error("'train' names the tag of the gold cases that are the train split, e.g. train", "train")
            return None
        return value

    def model(self, doc: dict[str, Any] | None) -> str | None:
        value = (doc or {}).get("model")
        if value is None:
            return None
        if not isinstance(value, str):
            self.error("'model' must be a model spec string like openai:URL#MODEL", "model")
            return None
        try:
            parse_backend_spec(value)
        except BadSpec as exc:
            self.error(f"'model': {exc}", "model")
            return None
        return value

    def budgets(self, doc: dict[str, Any] | None) -> Budgets:
        value = (doc or {}).get("budgets")
        if value is None:
            return Budgets()
        if not isinstance(value, dict):
            self.error("'budgets' must be a mapping {attempts: N, planner_tokens: N, cost_usd: X}", "budgets")
            return Budgets()
        self.unknown_keys(value, BUDGET_KEYS, "budgets", "budgets")
        found: dict[str, Any] = {}
        for key in ("attempts", "planner_tokens"):
            n = value.get(key)
            if n is None:
                continue
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                self.error(f"budgets.{key} must be a whole number >= 1", "budgets", key)
            else:
                found[key] = n
        cost = value.get("cost_usd")
        if cost is not None:
            if not isinstance(cost, int | float) or isinstance(cost, bool) or not math.isfinite(cost) or cost < 0:
                self.error("budgets.cost_usd must be a number of dollars >= 0", "budgets", "cost_usd")
            else:
                found["cost_usd"] = float(cost)
        return Budgets(**found)


def _field_name_problem(name: Any) -> str | None:
    if not isinstance(name, str) or not _FIELD_NAME.fullmatch(name):
        return "a field name is letters, digits and '_', not starting with a digit"
    if keyword.iskeyword(name) or name in _RESERVED:
        return f"'{name}' is a word of the expression language; pick another name"
    return None


# -- gold.jsonl -------------------------------------------------------------------------------


def _gold(
    data: bytes,
    issues: list[PackIssue],
    inputs: Mapping[str, FieldSpec],
    input_names: set[str] | None,
    outputs: Mapping[str, FieldSpec],
    output_names: set[str] | None,
    unsure_end: str | None,
) -> list[GoldCase]:
    text = _decode(data, GOLD_FILE, issues)
    if text is None:
        return []
    before = len(issues)
    cases = parse_evalset(text, None, issues, file=GOLD_FILE)
    if not cases and len(issues) == before:
        issues.append(PackIssue(GOLD_FILE, "no gold cases; add at least one line", kind="evalset"))
    good: list[GoldCase] = []
    for case in cases:
        found = len(issues)
        _check_keys(case, "input", case.input, input_names, inputs, issues)
        _check_keys(case, "expected", case.expected, output_names, outputs, issues)
        for node in case.human:
            if node != unsure_end:
                where = f"unsure_end is '{unsure_end}'" if unsure_end else f"{SPEC_FILE} declares no unsure_end"
                _bad(case, f"'human' answers node '{node}', but {where}; answers go to the unsure end", issues)
        if len(issues) == found:
            good.append(_gold_case(case))
    return good


def _gold_case(case: Case) -> GoldCase:
    return GoldCase(
        id=case.id,
        input=dict(case.input),
        expected=dict(case.expected),
        path=case.path,
        end=case.end,
        tags=case.tags,
        line=case.line,
        human=dict(case.human),
    )


def _bad(case: Case, message: str, issues: list[PackIssue]) -> None:
    issues.append(PackIssue(GOLD_FILE, f"case '{case.id}': {message}", case.line, "evalset"))


def _check_keys(
    case: Case,
    part: str,
    values: Mapping[str, Any],
    names: set[str] | None,
    declared: Mapping[str, FieldSpec],
    issues: list[PackIssue],
) -> None:
    section = "inputs" if part == "input" else "outputs"
    for key, value in values.items():
        if names is not None and key not in names:
            hint = nearest_key(key, names)
            _bad(case, f"{part}.{key} is not one of the declared {section}; declare it in {SPEC_FILE} ({hint})", issues)
            continue
        spec = declared.get(key)
        if spec is None:
            continue
        if spec.type is not None and not _is_type(value, spec.type):
            _bad(
                case,
                f"{part}.{key} is {_json_kind(value)}, but {section}.{key} is declared {spec.type}; "
                "fix the value or the type",
                issues,
            )
        elif value is not None and spec.values is not None and not any(_same_json(value, v) for v in spec.values):
            _bad(
                case,
                f"{part}.{key} is {value!r}, which is not in {section}.{key}.values; fix the value or add it there",
                issues,
            )
        elif (
            value is not None
            and spec.compare is not None
            and spec.compare.compare == "set"
            and not isinstance(value, list)
        ):
            _bad(case, f"{part}.{key} must be an array ({section}.{key} is compare: set)", issues)
        elif (
            value is not None
            and spec.compare is not None
            and spec.compare.compare == "number"
            and (not isinstance(value, int | float) or isinstance(value, bool))
        ):
            _bad(case, f"{part}.{key} must be a number ({section}.{key} is compare: number)", issues)


def _is_type(value: Any, type_: str) -> bool:
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


def _same_json(a: Any, b: Any) -> bool:
    """JSON equality: 1 equals 1.0, a boolean never equals a number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def _json_kind(value: Any) -> str:
    for kind, types in (("a boolean", bool), ("a number", int | float), ("a string", str), ("an array", list)):
        if isinstance(value, types):
            return kind
    return "an object" if isinstance(value, dict) else type(value).__name__


def _check_train(train: str | None, gold: list[GoldCase], src: SourceMap, issues: list[PackIssue]) -> None:
    """A train split needs cases in it and cases outside it (the held-out score)."""
    if train is None or not gold:
        return
    tagged = sum(train in case.tags for case in gold)
    if tagged == 0:
        issues.append(src.issue(f"'train': no gold case has the tag '{train}'", "train"))
    elif tagged == len(gold):
        issues.append(src.issue(f"'train': every gold case has the tag '{train}'; leave some out to score on", "train"))


def _check_rules(
    rules: list[tuple[Rule, Expression | None]],
    gold: list[GoldCase],
    unsure_end: str | None,
    src: SourceMap,
    issues: list[PackIssue],
) -> None:
    """A rule with an expression must hold on every gold case it can be evaluated on
    (every output it reads is in the case's expected values, every input in its input),
    except the cases that end at the unsure end: breaking a rule is what sends a case
    there. A gold case that breaks a rule is a contradiction no compile can resolve."""
    for i, (rule, expression) in enumerate(rules):
        if expression is None:
            continue
        where = f"rules[{i}] ({SPEC_FILE} line {src.line('rules', i)})"
        for case in gold:
            if unsure_end is not None and case.end == unsure_end:
                continue
            if not _applies(expression, case):
                continue
            env = {**case.expected, "input": case.input}
            try:
                held = expression.truthy(env)
            except ExprError as exc:
                issues.append(
                    PackIssue(
                        GOLD_FILE,
                        f"case '{case.id}': {where} cannot be evaluated on it: {exc}",
                        case.line,
                        "evalset",
                    )
                )
                continue
            if not held:
                issues.append(
                    PackIssue(
                        GOLD_FILE,
                        f"case '{case.id}' breaks {where}: {rule.expr}; fix the case or the rule",
                        case.line,
                        "evalset",
                    )
                )


def _applies(expression: Expression, case: GoldCase) -> bool:
    for ref in expression.references:
        root, _, rest = ref.partition(".")
        if root == "input":
            if rest.partition(".")[0] not in case.input:
                return False
        elif root not in case.expected:
            return False
    return True
