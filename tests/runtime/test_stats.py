from __future__ import annotations

import pytest

from runtime.stats import mcnemar_exact, paired_outcomes, percentile, wilson_interval


def test_wilson_interval_matches_a_known_value() -> None:
    low, high = wilson_interval(8, 10)
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert wilson_interval(10, 10)[1] == pytest.approx(1.0)


def test_mcnemar_exact_matches_the_binomial_tail() -> None:
    # 1 broken vs 9 fixed: 2 * P(X <= 1), X ~ Bin(10, 0.5) = 2 * 11/1024
    assert mcnemar_exact(9, 1) == pytest.approx(22 / 1024)
    assert mcnemar_exact(5, 5) == 1.0
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64)


def test_paired_outcomes_counts_discordant_pairs() -> None:
    assert paired_outcomes([True, True, False, False], [True, False, True, False]) == (1, 1, 1, 1)
    with pytest.raises(ValueError):
        paired_outcomes([True], [])


def test_percentile_uses_nearest_rank() -> None:
    assert percentile([5.0, 1.0, 3.0, 2.0, 4.0], 50) == 3.0
    assert percentile([float(i) for i in range(1, 101)], 95) == 95.0
    assert percentile([], 95) == 0.0
