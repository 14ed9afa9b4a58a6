"""The confidence a gate on support_triage's classify node records (Step.confidence),
put on a real eval report's traces, for the calibration tests of the runtime and the
studio: p 0.9 on the first 10 cases that expect a category (all right), 0.4 on the
other 4 (two of them wrong); st-13 expects no category (calibration leaves it out)."""

from __future__ import annotations

from runtime import EvalReport


def gate_classify(report: EvalReport) -> EvalReport:
    ranked = sorted(report.cases, key=lambda c: c.case_id)
    for i, case in enumerate(c for c in ranked if "category" in report.expected.get(c.case_id, {})):
        right = report.expected[case.case_id]["category"]
        conf = {"field": "category", "value": "nonsense" if i >= 12 else right, "p": 0.9 if i < 10 else 0.4}
        for step in case.trace.steps:
            if step.node == "classify":
                step.confidence = {**conf, "margin": 0.2, "source": "logprobs"}
    for case in ranked:
        if case.case_id == "st-13":
            case.trace.steps[0].confidence = {"field": "category", "value": None, "p": 0.2, "source": "logprobs"}
    return report
