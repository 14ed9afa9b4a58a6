"""Scoring beyond pass/fail: per-field accuracy, partial credit, F1 over the labels of
set fields, and the trivial baseline an author compares every score with.

Pure functions over plain values, so the CLI report (runtime.evaluate) and a host that
stores per-case results (the studio) compute the same numbers. A *row* is one scored
case run: its gold `expected` values and the `actual` values the run ended with (a field
the run never wrote is absent from `actual`). Each field is compared by its rule
(runtime.pack.fields); docs/eval-report.md defines every number."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

from runtime.pack.fields import FieldRule, group, label_set, matches, rule_for

Row = tuple[Mapping[str, Any], Mapping[str, Any]]  # (expected, actual)


def field_matches(
    rules: Mapping[str, FieldRule], expected: Mapping[str, Any], actual: Mapping[str, Any]
) -> dict[str, bool]:
    """Per expected field: whether the actual value matches it by the field's rule. A
    field the run never wrote does not match."""
    return {
        name: name in actual and matches(rule_for(rules, name), want, actual[name]) for name, want in expected.items()
    }


def case_score(matches: Mapping[str, bool], passed: bool) -> float:
    """Partial credit: the share of expected fields that match. A case that expects no
    field (it checks only its route) scores 1.0 when it passed, else 0.0."""
    if not matches:
        return 1.0 if passed else 0.0
    return sum(matches.values()) / len(matches)


def f1(tp: int, fp: int, fn: int) -> float:
    """2TP / (2TP + FP + FN); 1.0 when there is nothing to find and nothing was found."""
    denominator = 2 * tp + fp + fn
    return 1.0 if denominator == 0 else 2 * tp / denominator


def set_f1(pairs: Iterable[tuple[Any, Any]]) -> tuple[float, float]:
    """(micro-F1, macro-F1) over the labels of (expected, predicted) set values.

    Micro pools true and false positives and negatives over every label of every case;
    macro averages the per-label F1 over every label that is expected or predicted
    anywhere (1.0 when there is none). A missing or null prediction is no labels."""
    counts: dict[Hashable, list[int]] = {}  # label -> [tp, fp, fn]
    for expected, predicted in pairs:
        want, got = label_set(expected), label_set(predicted)
        for label in want | got:
            c = counts.setdefault(label, [0, 0, 0])
            c[0 if label in want and label in got else (1 if label in got else 2)] += 1
    micro = f1(*(sum(c[i] for c in counts.values()) for i in range(3)))
    macro = sum(f1(*c) for c in counts.values()) / len(counts) if counts else 1.0
    return micro, macro


def mode(rule: FieldRule, values: Sequence[Any]) -> Any:
    """The most frequent value under the rule (for a set field, the most frequent whole
    set); ties go to the value that comes first. None when there are no values."""
    if not values:
        return None
    groups = group(rule, values)
    return values[max(groups, key=len)[0]]


def trivial_answers(rules: Mapping[str, FieldRule], expected: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The trivial baseline's answer per field: the mode of the field's expected values
    over the cases that expect it."""
    names = list(dict.fromkeys(name for e in expected for name in e))
    return {name: mode(rule_for(rules, name), [e[name] for e in expected if name in e]) for name in names}


def baseline_summary(
    rules: Mapping[str, FieldRule],
    expected: Sequence[Mapping[str, Any]],
    answers: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The trivial baseline over these cases: `values` (its answer per field: the
    `answers` given, else the modes of these cases), `pass_rate` (share of cases whose
    every expected field equals that answer) and `mean_score` (its mean partial credit)."""
    answers = trivial_answers(rules, expected) if answers is None else answers
    scores, passes = [], 0
    for want in expected:
        matches = field_matches(rules, want, answers)
        passes += all(matches.values())
        scores.append(case_score(matches, True))
    n = len(expected)
    return {
        "values": dict(answers),
        "pass_rate": passes / n if n else 0.0,
        "mean_score": sum(scores) / n if n else 0.0,
    }


def field_table(rules: Mapping[str, FieldRule], rows: Sequence[Row]) -> dict[str, dict[str, Any]]:
    """Per expected field, in first-seen order: `compare`, `cases` (rows that expect it),
    `accuracy` (share of them that match), `baseline_accuracy` (share that the trivial
    answer matches); for set fields also `f1_micro`, `f1_macro` and the baseline's
    `baseline_f1_micro`, `baseline_f1_macro`."""
    answers = trivial_answers(rules, [e for e, _ in rows])
    table: dict[str, dict[str, Any]] = {}
    for name, trivial in answers.items():
        rule = rule_for(rules, name)
        present = [(e[name], a) for e, a in rows if name in e]
        right = sum(name in a and matches(rule, want, a[name]) for want, a in present)
        base = sum(matches(rule, want, trivial) for want, _ in present)
        n = len(present)
        entry: dict[str, Any] = {
            "compare": rule.compare,
            "cases": n,
            "accuracy": right / n if n else 0.0,
            "baseline_accuracy": base / n if n else 0.0,
        }
        if rule.compare == "set":
            entry["f1_micro"], entry["f1_macro"] = set_f1((want, a.get(name)) for want, a in present)
            entry["baseline_f1_micro"], entry["baseline_f1_macro"] = set_f1((want, trivial) for want, _ in present)
        table[name] = entry
    return table


def observed_values(expected: Mapping[str, Any], diffs: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The actual values of a run's expected fields, rebuilt from its field diffs (what a
    host stores): a field without a diff matched its rule, so its expected value stands
    in for it (the same verdict and the same labels); a missing field stays absent."""
    actual = dict(expected)
    for d in diffs:
        name = str(d.get("field"))
        if d.get("missing"):
            actual.pop(name, None)
        else:
            actual[name] = d.get("actual")
    return actual
