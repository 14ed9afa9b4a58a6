"""The verdict's no-model `nearest` arm (compiler.verdict.nearest_outcomes): each case
gets the answers of the known case whose input shares the most words with its own,
never its own, and is scored by the spec's field rules like every arm."""

from __future__ import annotations

from compiler.verdict import nearest_outcomes, score_of

KNOWN = [
    ("k1", {"message": "my card was charged twice"}, {"department": "billing"}),
    ("k2", {"message": "the parcel never arrived at my door"}, {"department": "shipping"}),
    ("k3", {"message": "the app crashes when I open it"}, {"department": "technical"}),
]


def test_each_case_gets_the_answers_of_the_known_case_nearest_in_words() -> None:
    cases = [
        ("c1", {"message": "charged twice on my card"}, {"department": "billing"}),
        ("c2", {"message": "parcel arrived broken"}, {"department": "shipping"}),
        ("c3", {"message": "crashes on open, the app"}, {"department": "billing"}),  # nearest says technical
    ]
    got = nearest_outcomes({}, KNOWN, cases)
    assert [(o.id, o.passed, o.calls, o.tokens) for o in got] == [
        ("c1", True, 0, 0),
        ("c2", True, 0, 0),
        ("c3", False, 0, 0),
    ]
    assert score_of(got).passed == 2


def test_a_known_case_is_never_its_own_neighbour() -> None:
    """Validation scored against validation (a spec with no train split) must not copy
    each case's own answers: the next nearest answers instead."""
    got = nearest_outcomes({}, KNOWN, [KNOWN[0]])
    assert [o.passed for o in got] == [False]  # k1's own words are nearest; it is skipped
    assert [o.passed for o in nearest_outcomes({}, KNOWN, [("k9", *KNOWN[0][1:])])] == [True]


def test_with_nothing_known_every_case_is_a_miss() -> None:
    assert [o.passed for o in nearest_outcomes({}, [], [KNOWN[0]])] == [False]


def test_a_tie_goes_to_the_known_case_listed_first() -> None:
    twins = [
        ("a", {"message": "refund please"}, {"department": "billing"}),
        ("b", {"message": "please refund"}, {"department": "shipping"}),
    ]
    got = nearest_outcomes({}, twins, [("c", {"message": "refund please now"}, {"department": "billing"})])
    assert [o.passed for o in got] == [True]
    got = nearest_outcomes({}, twins[::-1], [("c", {"message": "refund please now"}, {"department": "billing"})])
    assert [o.passed for o in got] == [False]
