"""The build's verdict (docs/compiler.md, "The verdict"): the chosen pack beside the best
one-call pack and the trivial baseline, on the test split, with 95% intervals; McNemar
against one call on the same test cases; and the auto tier, whose confidence threshold
is chosen on validation so that the auto tier's accuracy has a Clopper-Pearson lower
bound at or above the spec's `auto_accuracy`, backed by at least MIN_AUTO_CASES
validation cases, then measured on test."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import runtime
from compiler.trials import CaseOutcome
from runtime import mcnemar_exact, paired_outcomes, wilson_interval

MIN_AUTO_CASES = 10
ALPHA = 0.05


def clopper_pearson_lower(passed: int, total: int, alpha: float = ALPHA) -> float:
    """The lower end of the two-sided exact (Clopper-Pearson) interval for passed/total:
    the p at which P(X >= passed) = alpha / 2, found by bisection on the binomial tail."""
    if total <= 0 or passed <= 0:
        return 0.0

    def upper_tail(p: float) -> float:  # P(X >= passed), each term in log space (no overflow at large n)
        if p <= 0.0:
            return 0.0
        log_p, log_q = math.log(p), math.log1p(-p) if p < 1.0 else float("-inf")
        return sum(math.exp(_log_comb(total, k) + k * log_p + (total - k) * log_q) for k in range(passed, total + 1))

    lo, hi = 0.0, passed / total
    for _ in range(60):
        mid = (lo + hi) / 2
        if upper_tail(mid) < alpha / 2:
            lo = mid
        else:
            hi = mid
    return lo


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


@dataclass(frozen=True)
class SplitScore:
    passed: int
    total: int

    @property
    def accuracy(self) -> float:
        return self.passed / self.total if self.total else 0.0

    def to_dict(self, *, ci: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"passed": self.passed, "total": self.total, "accuracy": round(self.accuracy, 4)}
        if ci:
            out["ci"] = [round(x, 4) for x in wilson_interval(self.passed, self.total)]
        return out


def score_of(outcomes: Sequence[CaseOutcome]) -> SplitScore:
    return SplitScore(sum(o.passed for o in outcomes), len(outcomes))


def field_scores(outcomes: Sequence[CaseOutcome]) -> dict[str, dict[str, Any]]:
    """Per expected field: accuracy over the cases that expect it, with its interval."""
    names = list(dict.fromkeys(f for o in outcomes for f in o.fields))
    out = {}
    for name in names:
        seen = [o.fields[name] for o in outcomes if name in o.fields]
        right = sum(seen)
        out[name] = {
            "accuracy": round(right / len(seen), 4),
            "ci": [round(x, 4) for x in wilson_interval(right, len(seen))],
        }
    return out


@dataclass
class Arm:
    """One arm's validation and test outcomes."""

    name: str
    validation: list[CaseOutcome]
    test: list[CaseOutcome]
    setting: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        n = max(len(self.test), 1)
        return {
            "validation": score_of(self.validation).to_dict(),
            "test": {**score_of(self.test).to_dict(ci=True), "fields": field_scores(self.test)},
            "tokens_per_case": round(sum(o.tokens for o in self.test) / n, 1) if self.test else None,
            "calls_per_case": round(sum(o.calls for o in self.test) / n, 2) if self.test else None,
            "overflow_cases": sum(o.overflow for o in self.test + self.validation),
            "max_prompt_tokens": max((o.prompt_tokens for o in self.test + self.validation), default=0),
            "setting": self.setting,
        }


@dataclass(frozen=True)
class AutoTier:
    threshold: float | None
    reason: str
    validation_cases: int
    validation_accuracy: float | None
    lower_bound: float | None
    test_cases: int = 0
    test_share: float | None = None
    test_accuracy: float | None = None
    one_call_accuracy: float | None = None

    def to_dict(self) -> dict[str, Any]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 4)

        return {
            "threshold": self.threshold,
            "reason": self.reason,
            "validation": {
                "cases": self.validation_cases,
                "accuracy": r(self.validation_accuracy),
                "lower_bound": r(self.lower_bound),
            },
            "test": {
                "cases": self.test_cases,
                "share": r(self.test_share),
                "accuracy": r(self.test_accuracy),
                "one_call_accuracy": r(self.one_call_accuracy),
            },
        }


def _auto(outcomes: Sequence[CaseOutcome], threshold: float) -> list[CaseOutcome]:
    """The cases in the auto tier at `threshold`: eligible (ended done, not at the unsure
    end or a person) and as confident as the threshold (a run no gate measured counts as
    fully confident: nothing in it asked to be held)."""
    return [o for o in outcomes if o.eligible and (1.0 if o.confidence is None else o.confidence) >= threshold]


def choose_threshold(validation: Sequence[CaseOutcome], target: float) -> AutoTier:
    """The lowest confidence threshold whose validation auto tier holds at least
    MIN_AUTO_CASES cases and whose accuracy's lower bound reaches `target`."""
    levels = sorted({1.0 if o.confidence is None else o.confidence for o in validation if o.eligible})
    best_short: tuple[float, int, float] | None = None  # a threshold the bound allows but too few cases back
    best_bound: tuple[float, float, int] | None = None  # the highest bound seen with enough cases
    for t in levels:
        auto = _auto(validation, t)
        right = sum(o.passed for o in auto)
        bound = clopper_pearson_lower(right, len(auto))
        if len(auto) < MIN_AUTO_CASES:
            if bound >= target and best_short is None:
                best_short = (t, len(auto), bound)
            continue
        if bound >= target:
            return AutoTier(
                t,
                f"lowest threshold whose auto tier ({len(auto)} validation cases, {right} right) has a 95% lower "
                f"bound of {bound:.2f} >= {target:.2f}",
                len(auto),
                right / len(auto),
                bound,
            )
        if best_bound is None or bound > best_bound[0]:
            best_bound = (bound, t, len(auto))
    if best_short is not None:
        t, n, bound = best_short
        reason = (
            f"refused: the only thresholds reaching a lower bound of {target:.2f} are backed by {n} validation "
            f"cases (at least {MIN_AUTO_CASES} needed); no auto tier: the pack is written without a confidence "
            "gate, so every answer should be reviewed"
        )
        return AutoTier(None, reason, n, None, bound)
    shown = f"; the best lower bound was {best_bound[0]:.2f}" if best_bound else ""
    return AutoTier(
        None,
        f"no threshold gives an auto tier whose 95% lower bound reaches {target:.2f}{shown}; no auto tier: the pack "
        "is written without a confidence gate, so every answer should be reviewed",
        0,
        None,
        best_bound[0] if best_bound else None,
    )


def measure_auto(tier: AutoTier, test: Sequence[CaseOutcome], one_call: Sequence[CaseOutcome] | None) -> AutoTier:
    """The validation-chosen tier measured on test, beside one call on the same cases."""
    if tier.threshold is None or not test:
        return tier
    auto = _auto(test, tier.threshold)
    ids = {o.id for o in auto}
    one = [o for o in one_call or [] if o.id in ids]
    return AutoTier(
        tier.threshold,
        tier.reason,
        tier.validation_cases,
        tier.validation_accuracy,
        tier.lower_bound,
        test_cases=len(auto),
        test_share=len(auto) / len(test),
        test_accuracy=sum(o.passed for o in auto) / len(auto) if auto else None,
        one_call_accuracy=sum(o.passed for o in one) / len(one) if one else None,
    )


def mcnemar(pack: Sequence[CaseOutcome], one_call: Sequence[CaseOutcome]) -> dict[str, Any] | None:
    """Pack vs one call on the test cases both ran: fixed (pack right, one call wrong),
    broken (the reverse) and the exact two-sided p."""
    theirs = {o.id: o.passed for o in one_call}
    shared = [o for o in pack if o.id in theirs]
    if not shared:
        return None
    _, fixed, broken, _ = paired_outcomes([theirs[o.id] for o in shared], [o.passed for o in shared])
    return {"fixed": fixed, "broken": broken, "p": round(mcnemar_exact(fixed, broken), 4), "cases": len(shared)}


def baseline_outcomes(
    rules: Mapping[str, Any], answers: Mapping[str, Any], cases: Sequence[tuple[str, Mapping[str, Any]]]
) -> list[CaseOutcome]:
    """The trivial baseline (train's most frequent value per field) on `cases`."""
    return [_copied(rules, case_id, expected, answers) for case_id, expected in cases]


def nearest_outcomes(
    rules: Mapping[str, Any],
    known: Sequence[tuple[str, Mapping[str, Any], Mapping[str, Any]]],
    cases: Sequence[tuple[str, Mapping[str, Any], Mapping[str, Any]]],
) -> list[CaseOutcome]:
    """No model: each case gets the expected values of the known case (id, input,
    expected) whose input shares the most words with its own (word-set Jaccard, as
    `strategy: nearest` ranks examples; ties by order), never its own. Where the gold
    cases sit close to each other this is the baseline a pack should beat, not the most
    frequent value; shown in the verdict, not yet enforced (docs/compiler.md, "The verdict")."""
    out = []
    for case_id, inp, expected in cases:
        others = [
            (runtime.similarity(inp, theirs), -i, copied)
            for i, (other, theirs, copied) in enumerate(known)
            if other != case_id
        ]
        answers = max(others, key=lambda t: (t[0], t[1]))[2] if others else {}
        out.append(_copied(rules, case_id, expected, answers))
    return out


def _copied(
    rules: Mapping[str, Any], case_id: str, expected: Mapping[str, Any], answers: Mapping[str, Any]
) -> CaseOutcome:
    """A no-model arm's outcome on one case: `answers` scored against `expected`."""
    matches = runtime.field_matches(rules, expected, answers)
    passed = all(matches.values())
    return CaseOutcome(
        id=case_id,
        passed=passed,
        score=runtime.case_score(matches, passed),
        fields=matches,
        confidence=None,
        eligible=False,
        calls=0,
        tokens=0,
        overflow=False,
    )


__all__ = [
    "MIN_AUTO_CASES",
    "Arm",
    "AutoTier",
    "SplitScore",
    "baseline_outcomes",
    "choose_threshold",
    "clopper_pearson_lower",
    "field_scores",
    "mcnemar",
    "measure_auto",
    "nearest_outcomes",
    "score_of",
]
