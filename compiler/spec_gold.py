"""gold.jsonl: the evalset's line format, checked against spec.yaml: every key a declared
field, every value of its declared type and in its declared values (each item, for a
multi-label field), human answers at the unsure end, every rule expression true, each
case in one split at most. Each problem is an issue at its gold line."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from compiler.spec_fields import is_type, json_kind, same_json
from compiler.spec_types import GOLD_FILE, SPEC_FILE, FieldSpec, GoldCase, Rule
from runtime import Case, ExprError, Expression, PackIssue, SourceMap, nearest_key, parse_evalset


def read_gold(
    text: str,
    issues: list[PackIssue],
    inputs: dict[str, FieldSpec],
    input_names: set[str] | None,
    outputs: dict[str, FieldSpec],
    output_names: set[str] | None,
    unsure_end: str | None,
) -> list[GoldCase]:
    """The gold cases that pass every check. `inputs` and `outputs` are updated in place:
    an untyped field whose `values` gold shows as lists is marked `item_set`."""
    before = len(issues)
    cases = parse_evalset(text, None, issues, file=GOLD_FILE)
    if not cases and len(issues) == before:
        issues.append(PackIssue(GOLD_FILE, "no gold cases; add at least one line", kind="evalset"))
    _mark_item_sets(inputs, [c.input for c in cases])
    _mark_item_sets(outputs, [c.expected for c in cases])
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


def _mark_item_sets(fields: dict[str, FieldSpec], values: list[Mapping[str, Any]]) -> None:
    """An untyped field with `values` whose every non-null gold value is a list (and
    some gold value is one) is multi-label: its `values` are the item set."""
    for name, spec in fields.items():
        if spec.values is None or spec.type is not None:
            continue
        shown = [v[name] for v in values if v.get(name) is not None]
        if shown and all(isinstance(v, list) for v in shown):
            fields[name] = dataclasses.replace(spec, item_set=True)


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
        problem = _value_problem(value, spec, f"{part}.{key}", f"{section}.{key}")
        if problem:
            _bad(case, problem, issues)


def _value_problem(value: Any, spec: FieldSpec, at: str, field: str) -> str | None:
    """What is wrong with one gold value of a declared field, or None."""
    if spec.type is not None and not is_type(value, spec.type):
        return f"{at} is {json_kind(value)}, but {field} is declared {spec.type}; fix the value or the type"
    if value is None:
        return None
    if spec.values is not None and spec.item_set and isinstance(value, list):
        for i, item in enumerate(value):
            if not any(same_json(item, v) for v in spec.values):
                return (
                    f"{at}[{i}] is {item!r}, which is not in {field}.values (the items the field's lists may hold); "
                    "fix the value or add it there"
                )
    elif spec.values is not None and not any(same_json(value, v) for v in spec.values):
        return f"{at} is {value!r}, which is not in {field}.values; fix the value or add it there"
    rule = spec.compare.compare if spec.compare is not None else None
    if rule == "set" and not isinstance(value, list):
        return f"{at} must be an array ({field} is compare: set)"
    if rule == "number" and (not isinstance(value, int | float) or isinstance(value, bool)):
        return f"{at} must be a number ({field} is compare: number)"
    return None


def check_splits(tags: Mapping[str, str | None], gold: list[GoldCase], src: SourceMap, issues: list[PackIssue]) -> None:
    """Each split tag named is carried by some gold case; the train tag leaves some cases
    out (the held-out score); no case carries two split tags."""
    if not gold:
        return
    named = {key: tag for key, tag in tags.items() if tag is not None}
    for key, tag in named.items():
        carried = sum(tag in case.tags for case in gold)
        if carried == 0:
            issues.append(src.issue(f"'{key}': no gold case has the tag '{tag}'", key))
        elif key == "train" and carried == len(gold):
            issues.append(src.issue(f"'train': every gold case has the tag '{tag}'; leave some out to score on", key))
    for case in gold:
        held = [key for key, tag in named.items() if tag in case.tags]
        if len(held) > 1:
            words = " and ".join(f"'{named[k]}' ({k})" for k in held)
            issues.append(
                PackIssue(
                    GOLD_FILE,
                    f"case '{case.id}' carries the split tags {words}; a case is in one split only: drop all but one",
                    case.line,
                    "evalset",
                )
            )


def check_rules(
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


def bears_out(expression: Expression, case: GoldCase) -> bool:
    """Whether `case` sets every field the rule reads and satisfies it (a rule that
    cannot be evaluated on it is not borne out)."""
    if not _applies(expression, case):
        return False
    try:
        return expression.truthy({**case.expected, "input": case.input})
    except ExprError:
        return False


def _applies(expression: Expression, case: GoldCase) -> bool:
    for ref in expression.references:
        root, _, rest = ref.partition(".")
        if root == "input":
            if rest.partition(".")[0] not in case.input:
                return False
        elif root not in case.expected:
            return False
    return True
