"""Small statistics for eval reports: intervals for a pass rate, and the exact McNemar
test for two evals of the same cases."""

from __future__ import annotations

import math
from collections.abc import Sequence


def wilson_interval(passed: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval for a binomial proportion (95% by default)."""
    if total <= 0:
        return (0.0, 1.0)
    if not 0 <= passed <= total:
        raise ValueError("passed must be between 0 and total")
    p = passed / total
    denom = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def mcnemar_exact(fixed: int, broken: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pairs: `fixed` cases that
    failed before and pass now, `broken` cases that passed before and fail now.

    Under the null hypothesis each discordant case is a fair coin, so the p-value is
    the two-sided binomial tail of min(fixed, broken) in fixed + broken trials."""
    if fixed < 0 or broken < 0:
        raise ValueError("counts must be >= 0")
    n = fixed + broken
    if n == 0:
        return 1.0
    k = min(fixed, broken)
    tail: float = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired_outcomes(before: Sequence[bool], after: Sequence[bool]) -> tuple[int, int, int, int]:
    """(both pass, fixed, broken, both fail) over paired outcomes."""
    if len(before) != len(after):
        raise ValueError("paired outcomes need the same cases on both sides")
    both = sum(1 for b, a in zip(before, after, strict=False) if b and a)
    fixed = sum(1 for b, a in zip(before, after, strict=False) if not b and a)
    broken = sum(1 for b, a in zip(before, after, strict=False) if b and not a)
    return both, fixed, broken, len(before) - both - fixed - broken


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank on the sorted values; 0.0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))
    return float(ordered[k])
