"""How an output field's values are compared: the manifest's `fields:` key.

One rule per field serves both places where two values of a field are compared: the
evalset runner (is the answer right?) and a generate node's vote (do two draws agree?).
A field the manifest does not name is compared `exact`.

    fields:
      labels: {compare: set}
      amount_usd: {compare: number, tolerance: 0.01}
      name: {compare: text}

- `exact`: equality of the JSON values (1 equals 1.0; true does not equal 1).
- `loose`: strings compared case- and whitespace-insensitively (trimmed, runs of
  whitespace made one space, casefolded); inside arrays and objects too.
- `set`: arrays compared as sets (order and repeats ignored); anything else exact.
- `number`: numbers (or strings that read as one) equal when they differ by at most
  `tolerance` (default 0; a float's last-bit rounding is forgiven); anything else exact.
- `text`: strings normalised (Unicode NFKC, casefolded, punctuation turned into spaces, whitespace
  collapsed), inside arrays and objects too.
- `scorer:NAME`: a function the host registered (runtime.scorers), with the field's
  `options`; two values match when its score is at least the field's `pass` (default 1)."""

from __future__ import annotations

import difflib
import math
import unicodedata
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from runtime.errors import PackIssue
from runtime.pack.yamlsrc import SourceMap, nearest

if TYPE_CHECKING:
    from runtime.scorers import Scored

EVALSET = "evalset.jsonl"
COMPARES = ("exact", "loose", "set", "number", "text")  # and "scorer:NAME" (runtime.scorers)
RULE_KEYS = frozenset({"compare", "tolerance", "options", "pass"})


@dataclass(frozen=True)
class FieldRule:
    """How a field's values are compared (one of COMPARES, or "scorer"); `tolerance` for
    `number` only; for a scorer: its name, its options, the score that passes, and the
    function the host registered under the name (None when no registry was given)."""

    compare: str = "exact"
    tolerance: float = 0.0
    scorer: str = ""
    options: tuple[tuple[str, Any], ...] = ()
    pass_at: float = 1.0
    function: Any = field(default=None, compare=False, hash=False, repr=False)
    name: str = field(default="", compare=False)  # the field's name, for a scorer's messages


EXACT = FieldRule()


def rule_for(fields: Mapping[str, FieldRule], name: str) -> FieldRule:
    """The rule of field `name`: the declared one, else exact."""
    return fields.get(name, EXACT)


def values_match(rule: FieldRule, expected: Any, actual: Any) -> bool:
    """Whether two values of a field are the same under its rule (a scorer's may raise
    runtime.scorers.ScorerFailed)."""
    if rule.compare == "scorer":
        return scorer_result(rule, expected, actual).score >= rule.pass_at
    if rule.compare == "number":
        a, b = _number(expected), _number(actual)
        if a is not None and b is not None:
            return abs(a - b) <= rule.tolerance + 1e-9 * max(1.0, abs(a), abs(b))
        return _canonical(expected) == _canonical(actual)
    return compare_key(rule, expected) == compare_key(rule, actual)


def scorer_result(rule: FieldRule, expected: Any, actual: Any) -> Scored:
    """A scorer rule's Scored for one pair of values (runtime.scorers.score)."""
    from runtime.scorers import score  # below the pack package: imports no loader

    return score(rule.name, rule.scorer, rule.function, dict(rule.options), expected, actual)


def matches(rule: FieldRule, expected: Any, actual: Any) -> bool:
    """values_match for tallies over many cases (field accuracy, blame, the baseline, a
    vote): a scorer that fails on a pair counts as no match there; the case's own
    verdict (runtime.case_scoring) reports the failure."""
    from runtime.scorers import ScorerFailed

    try:
        return values_match(rule, expected, actual)
    except ScorerFailed:
        return False


def compare_key(rule: FieldRule, value: Any) -> Hashable:
    """What the rule compares of a value, as a hashable key: two values are the same
    under every rule but `number` exactly when their keys are equal. (`number` with a
    tolerance is not transitive, so it has no key; its values are compared in pairs.)"""
    if rule.compare == "set" and isinstance(value, list):
        return ("set", label_set(value))
    if rule.compare == "loose":
        return _canonical(_normalised(value, _loose))
    if rule.compare == "text":
        return _canonical(_normalised(value, normal_text))
    return _canonical(value)


def label_set(value: Any) -> frozenset[Hashable]:
    """The labels of a set field's value, each item as a hashable key (items may be any
    JSON value). None is no labels; a lone scalar is one label."""
    if value is None:
        return frozenset()
    items = value if isinstance(value, list) else [value]
    return frozenset(_canonical(item) for item in items)


def group(rule: FieldRule, values: Sequence[Any]) -> list[list[int]]:
    """Indexes of `values` grouped by the rule: each value joins the first group whose
    first member it equals, else starts a group. Groups in order of their first member.
    Linear in the values, except for `number`, which compares each with every group."""
    groups: list[list[int]] = []
    if rule.compare not in ("number", "scorer"):
        by_key: dict[Hashable, list[int]] = {}
        for i, value in enumerate(values):
            key = compare_key(rule, value)
            if key not in by_key:
                by_key[key] = []
                groups.append(by_key[key])
            by_key[key].append(i)
        return groups
    for i, value in enumerate(values):
        for members in groups:
            if matches(rule, values[members[0]], value):
                members.append(i)
                break
        else:
            groups.append([i])
    return groups


def _canonical(value: Any) -> Hashable:
    """A hashable key of a JSON value: equal keys for equal values, where 1 equals 1.0
    but a boolean never equals a number, and an object's key order does not matter."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("array", tuple(_canonical(v) for v in value))
    if isinstance(value, dict):
        return ("object", frozenset((str(k), _canonical(v)) for k, v in value.items()))
    return ("other", repr(value))


def normal_text(text: str) -> str:
    """`text` compare: NFKC, casefolded, punctuation turned into spaces, whitespace collapsed."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    kept = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in folded)
    return " ".join(kept.split())


def _loose(text: str) -> str:
    return " ".join(text.split()).casefold()


def _normalised(value: Any, fold: Any) -> Any:
    if isinstance(value, str):
        return fold(value)
    if isinstance(value, list):
        return [_normalised(v, fold) for v in value]
    if isinstance(value, dict):
        return {k: _normalised(v, fold) for k, v in value.items()}
    return value


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def load_fields(
    spec: Any, source: SourceMap, issues: list[PackIssue], scorers: Mapping[str, Any] | None = None
) -> dict[str, FieldRule]:
    """The manifest's `fields:` (a mapping of field name to {compare, tolerance}); each
    problem is appended to `issues` with the manifest line it is on. `scorers`: the
    host's scorer registry; a `scorer:NAME` it does not hold is refused (None: no
    registry given, names are not checked and the rule has no function)."""
    if spec is None:
        return {}
    if not isinstance(spec, dict):
        issues.append(source.issue("'fields' must map field names to {compare: ...}", "fields"))
        return {}
    rules: dict[str, FieldRule] = {}
    for name, body in spec.items():
        at = ("fields", name)
        if not name or "." in name or name == "input":
            issues.append(source.issue(f"fields: '{name}' is not a state field name (use a top-level field)", *at))
            continue
        if not isinstance(body, dict):
            issues.append(source.issue(f"fields.{name} must be a mapping like {{compare: set}}", *at))
            continue
        ok = True
        for key in body:
            if key not in RULE_KEYS:
                issues.append(
                    source.issue(
                        f"fields.{name}: unknown key '{key}'; {nearest(key, RULE_KEYS)}", *at, key, kind="unknown_key"
                    )
                )
                ok = False
        compare = body.get("compare", "exact")
        if isinstance(compare, str) and compare.startswith("scorer:"):
            rule = _scorer_rule(name, compare, body, source, issues, scorers)
            if rule is not None and ok:
                rules[name] = rule
            continue
        for key in ("options", "pass"):
            if key in body:
                issues.append(source.issue(f"fields.{name}: '{key}' applies to a scorer only; remove it", *at, key))
                ok = False
        if compare not in COMPARES:
            issues.append(
                source.issue(
                    f"fields.{name}: unknown compare {compare!r}; use one of: {', '.join(COMPARES)}", *at, "compare"
                )
            )
            ok = False
        tolerance = body.get("tolerance")
        if tolerance is not None:
            if compare != "number":
                issues.append(
                    source.issue(
                        f"fields.{name}: 'tolerance' applies to compare: number only, not {compare!r}; remove it",
                        *at,
                        "tolerance",
                    )
                )
                ok = False
            elif (
                not isinstance(tolerance, int | float)
                or isinstance(tolerance, bool)
                or not math.isfinite(tolerance)
                or tolerance < 0
            ):
                issues.append(
                    source.issue(f"fields.{name}: tolerance must be a number >= 0, got {tolerance!r}", *at, "tolerance")
                )
                ok = False
        if ok:
            rules[name] = FieldRule(str(compare), float(tolerance or 0.0), name=name)
    return rules


def _scorer_rule(
    name: str,
    compare: str,
    body: Mapping[str, Any],
    source: SourceMap,
    issues: list[PackIssue],
    scorers: Mapping[str, Any] | None,
) -> FieldRule | None:
    at = ("fields", name)
    scorer = compare.removeprefix("scorer:")
    before = len(issues)
    if not scorer:
        issues.append(source.issue(f"fields.{name}: compare: scorer: needs a name (scorer:NAME)", *at, "compare"))
    elif scorers is not None and scorer not in scorers:
        known = ", ".join(sorted(scorers)) or "none"
        issues.append(
            source.issue(
                f"fields.{name}: unknown scorer '{scorer}'; the host registers: {known}",
                *at,
                "compare",
                kind="reference",
            )
        )
    options = body.get("options", {})
    if not isinstance(options, dict) or not all(isinstance(k, str) for k in options):
        issues.append(source.issue(f"fields.{name}: options must be a mapping of option name to value", *at, "options"))
        options = {}
    passing = body.get("pass", 1.0)
    if isinstance(passing, bool) or not isinstance(passing, int | float) or not 0 <= passing <= 1:
        issues.append(source.issue(f"fields.{name}: pass must be a score from 0 to 1, got {passing!r}", *at, "pass"))
    if "tolerance" in body:
        issues.append(source.issue(f"fields.{name}: 'tolerance' applies to compare: number only; remove it", *at))
    if len(issues) > before:
        return None
    return FieldRule(
        "scorer",
        scorer=scorer,
        options=tuple(sorted(options.items())),
        pass_at=float(passing),
        function=scorers.get(scorer) if scorers is not None else None,
        name=name,
    )


def check_fields(
    rules: Mapping[str, FieldRule],
    written: set[str],
    cases: Sequence[tuple[str, int, Mapping[str, Any]]],
    source: SourceMap,
    issues: list[PackIssue],
) -> None:
    """A declared field no node writes (a typo); a gold value the rule cannot compare
    (a set field's expected value that is not an array, a number field's that is not a number)."""
    for name in rules:
        if written and name not in written:
            issues.append(
                source.issue(
                    f"fields: '{name}' is written by no node{_did_you_mean(name, written)}; name a field a node writes",
                    "fields",
                    name,
                    kind="reference",
                )
            )
    for case_id, line, expected in cases:  # (id, line, expected) of each evalset case
        for name, value in expected.items():
            rule = rules.get(name)
            if rule is None or value is None:
                continue
            if rule.compare == "set" and not isinstance(value, list):
                issues.append(
                    PackIssue(
                        EVALSET,
                        f"case '{case_id}': expected.{name} must be an array (fields.{name} is compare: set)",
                        line,
                        "evalset",
                    )
                )
            elif rule.compare == "number" and _number(value) is None:
                issues.append(
                    PackIssue(
                        EVALSET,
                        f"case '{case_id}': expected.{name} must be a number (fields.{name} is compare: number)",
                        line,
                        "evalset",
                    )
                )


def _did_you_mean(name: str, known: set[str]) -> str:
    match = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return f" (did you mean '{match[0]}'?)" if match else ""
