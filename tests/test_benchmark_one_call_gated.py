"""benchmarks/one_call_gated.py gates one call on its own logprobs and judges its split
exactly as benchmarks/real_models.py judges the pack's: the same halves, the threshold
chosen on the calibration half only. These hold the parts that decide its figures."""

from __future__ import annotations

import math

from benchmarks import one_call_gated, real_models
from benchmarks.real_models import Row
from runtime import ModelCall
from runtime.backends.base import ModelReply, TokenLogprob

_DEPARTMENTS = [("zz", 0.5), ("billing", 0.3), ("technical", 0.1), ("shipping", 0.05), ("account", 0.05)]


def _row(case: str, exact: bool, confidence: float | None) -> Row:
    return Row("t", "one_call_gated", case, {}, {}, exact, float(exact), confidence=confidence)


def test_a_case_is_as_sure_as_its_least_sure_field_and_unknown_if_any_field_is() -> None:
    assert real_models.least_sure({"department": 0.9, "subissue": 0.6}) == 0.6
    assert real_models.least_sure({"department": 0.9, "subissue": None}) is None
    assert real_models.least_sure({}) is None


def test_an_enum_field_is_renormalised_over_its_labels_and_a_string_is_not() -> None:
    task = real_models.load_task("helpdesk_routing")
    text = '{"department":"billing","subissue":"double_charge"}'
    tokens = [
        TokenLogprob('{"department":"', 0.0),
        # Every department listed, and a token the grammar forbids ("zz") that takes half.
        TokenLogprob("billing", math.log(0.3), [(t, math.log(p)) for t, p in _DEPARTMENTS]),
        TokenLogprob('","subissue":"', 0.0),
        TokenLogprob("double_charge", math.log(0.5), [("double_charge", math.log(0.5))]),
        TokenLogprob('"}', 0.0),
    ]
    got = {"department": "billing", "subissue": "double_charge"}
    found = one_call_gated.field_confidences(task, text, tokens, got)
    assert math.isclose(found["department"], 0.3 / (0.3 + 0.1 + 0.05 + 0.05))  # "zz" counts for nothing
    # No rival listed: the unlisted sub-issues may together hold what the list leaves.
    assert found["subissue"] is not None and math.isclose(found["subissue"], 0.5)
    extraction = real_models.load_task("shipping_details")
    name_text = '{"name":"Ann"}'
    raw = one_call_gated.field_confidences(
        extraction,
        name_text,
        [TokenLogprob('{"name":"', 0.0), TokenLogprob("Ann", math.log(0.4)), TokenLogprob('"}', 0.0)],
        {"name": "Ann"},
    )
    assert raw["name"] == 0.4  # no enum: the plain product
    assert raw["city"] is None  # not answered


def test_the_halves_are_real_models_halves_and_the_threshold_is_chosen_on_the_calibration_half() -> None:
    order = {f"c{i}": i for i in range(40)}
    # Calibration half (even): sure cases right, unsure ones wrong. Measured half (odd):
    # every case right at any confidence, so a threshold chosen there would be 0.
    rows = [
        _row(f"c{i}", exact=(i % 2 == 1) or i % 4 == 0, confidence=0.9 if i % 4 in (0, 1) else 0.2)
        for i in reversed(range(40))
    ]
    calib, measure = one_call_gated.halves(rows, order)
    assert [r.case for r in calib] == [f"c{i}" for i in range(0, 40, 2)]
    assert [r.case for r in measure] == [f"c{i}" for i in range(1, 40, 2)]
    found = one_call_gated.split(rows, order, target=0.95)
    assert found["calibrated"]["threshold"] == 0.9
    measured = [r for r in measure if r.confidence is not None and r.confidence >= 0.9]
    assert found["calibrated"]["auto"] == len(measured) and 0 < len(measured) < len(measure)
    assert found["whole_half"] == (20, 20)


def test_the_most_confident_share_ranks_by_confidence_with_unknown_last() -> None:
    rows = [_row("a", False, None), _row("b", True, 0.8), _row("c", False, 0.1), _row("d", True, 0.9)]
    assert one_call_gated.most_confident(rows, 0.5) == (2, 2)
    assert one_call_gated.most_confident(rows, 0.75) == (2, 3)
    assert one_call_gated.most_confident(rows, 1.0) == (2, 4)


def test_cases_tied_at_the_cut_count_at_their_groups_accuracy_whatever_their_order() -> None:
    # Agreement shares: four cases tie at 1.0, one right of four; the cut takes two of them.
    tied = [_row("a", False, 1.0), _row("b", True, 1.0), _row("c", False, 1.0), _row("d", False, 1.0)]
    rows = [*tied, _row("e", True, 2 / 3), _row("f", True, 1 / 3), _row("g", False, 1 / 3), _row("h", True, None)]
    assert one_call_gated.most_confident(rows, 0.25) == (0.5, 2)
    assert one_call_gated.most_confident(list(reversed(rows)), 0.25) == (0.5, 2)
    assert one_call_gated.most_confident(rows, 0.75) == (2.5, 6)  # all four tied, e, and half of f and g


class _Answers:
    """Replies with one fixed answer and two tokens' logprobs when asked for them: the
    harness's bookkeeping is under test here, not a model."""

    spec = "fixed"

    def __init__(self) -> None:
        self.asked: list[bool] = []

    def complete(self, call: ModelCall) -> ModelReply:
        self.asked.append(call.logprobs)
        text = '{"department":"billing","subissue":"double_charge"}'
        tokens = [TokenLogprob(text[:15], 0.0), TokenLogprob(text[15:], math.log(0.5))] if call.logprobs else None
        return ModelReply(text, prompt_tokens=10, completion_tokens=5, logprobs=tokens)


def test_the_plain_arm_asks_no_logprobs_and_the_gated_arm_records_its_confidence() -> None:
    task = real_models.load_task("helpdesk_routing")
    cases = task.cases[:2]
    backend = _Answers()
    plain = one_call_gated.run(task, cases, backend, gated=False)  # type: ignore[arg-type]
    assert backend.asked == [False, False]
    assert all((r.arm, r.confidence, r.auto_end, r.extra) == ("one_call", None, True, {}) for r in plain)
    gated = one_call_gated.run(task, cases, backend, gated=True)  # type: ignore[arg-type]
    assert backend.asked[2:] == [True, True]
    for row in gated:
        assert row.arm == "one_call_gated" and set(row.extra["confidences"]) == {"department", "subissue"}
        assert row.confidence == real_models.least_sure(row.extra["confidences"]) and row.auto_end
    assert [r.exact for r in plain] == [r.exact for r in gated]
