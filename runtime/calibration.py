"""Calibration from the evalset: how far a gated node's confidence can be trusted.

A generate node with `confidence: {field, min}` records on its trace step the
confidence of the value it chose (`Step.confidence`: field, value, p, margin, source),
whether or not the gate let it through. Over an eval's runs that gives, per gated
node, pairs (p, correct): `correct` is whether the chosen value equals the case's
expected value for the field. A gate on several fields (`{fields, min}`) records its
least sure field's measure and every gated field's value (`values`): `correct` is
whether all of them equal the expected ones. From the pairs:

- a reliability table: 10 equal bins of p, each with its count, mean p and accuracy;
- the curve as the threshold moves over the distinct p values: at threshold t the
  auto tier is every pair with p >= t (the gate holds a node below `min`), so the
  curve gives the share of runs the gate lets through and the accuracy among them;
- a proposal: the lowest threshold whose auto-tier accuracy reaches a target with at
  least MIN_CASES runs in its auto tier, with its auto share and the Wilson 95% lower
  bound of that accuracy (a threshold that only 3 right answers stand behind says
  nothing about the next hundred).

Runs that never reached the node, cases whose expected values lack the field, and
steps with no probability (p None: one draw and no logprobs) are left out; when a node
is visited more than once in a run, its last visit is the one that counts (its value is
the one the run kept). Documented in docs/eval-report.md ("calibration")."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from runtime.pack.fields import FieldRule, matches, rule_for
from runtime.pack.model import Pack
from runtime.stats import wilson_interval
from runtime.trace import Trace

__all__ = [
    "BINS",
    "DEFAULT_TARGET",
    "Calibration",
    "CalibrationPoint",
    "calibrate",
    "format_calibration",
    "gate_minimums",
]

BINS = 10
DEFAULT_TARGET = 0.95  # `packforge eval --target-auto-accuracy`
MIN_CASES = 10  # no threshold is proposed with fewer runs than this in its auto tier


def _correct(rules: Mapping[str, FieldRule], field: str, expected: Any, chosen: Any) -> bool:
    """Whether the chosen value of `field` counts as right: by the pack's `fields:` rule
    for it, as scoring compares it (runtime/pack/fields.py)."""
    return matches(rule_for(rules, field), expected, chosen)


@dataclass(frozen=True)
class CalibrationPoint:
    """The auto tier at one threshold: runs with p >= threshold."""

    threshold: float
    auto: int  # runs in the auto tier
    correct: int  # of them, right
    total: int  # all calibrated runs

    @property
    def auto_share(self) -> float:
        return self.auto / self.total if self.total else 0.0

    @property
    def auto_accuracy(self) -> float | None:
        return self.correct / self.auto if self.auto else None

    @property
    def accuracy_low(self) -> float | None:
        """The Wilson 95% lower bound of `auto_accuracy`."""
        return wilson_interval(self.correct, self.auto)[0] if self.auto else None

    def sentence(self) -> str:
        """What the threshold means, in words an author reads."""
        at = f"at {threshold_text(self.threshold)}"
        if not self.auto:
            return f"{at}, no case goes through automatically; all go to the next tier"
        acc = f"{_pct(self.auto_accuracy)} accuracy"
        if self.auto == self.total:
            return f"{at}, all cases go through automatically at {acc}; none go to the next tier"
        return f"{at}, {_pct(self.auto_share)} of cases go through automatically at {acc}; the rest go to the next tier"

    def to_dict(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "auto": self.auto,
            "auto_share": self.auto_share,
            "auto_accuracy": self.auto_accuracy,
            "accuracy_low": self.accuracy_low,
            "sentence": self.sentence(),
        }


@dataclass
class Calibration:
    """One gated node's (p, correct) pairs over an eval, and what they say."""

    node: str
    field: str
    min: float | None = None  # the node's current threshold, when known
    pairs: list[tuple[float, bool]] = dataclasses.field(default_factory=list)
    sources: Counter[str] = dataclasses.field(default_factory=Counter)
    without_p: int = 0  # steps that recorded no probability
    skipped: int = 0  # runs whose case has no expected value for the field
    # Runs whose draws disagreed (`samples`/`agree`): held whatever their p, so never in
    # the auto tier at any threshold; each entry is whether its value was right.
    held: list[bool] = dataclasses.field(default_factory=list)

    @property
    def source(self) -> str:
        """Where p came from: "logprobs", "agreement", or "mixed"."""
        if not self.sources:
            return ""
        return next(iter(self.sources)) if len(self.sources) == 1 else "mixed"

    @property
    def accuracy(self) -> float | None:
        runs = len(self.pairs) + len(self.held)
        return (sum(ok for _, ok in self.pairs) + sum(self.held)) / runs if runs else None

    @property
    def total(self) -> int:
        return len(self.pairs) + len(self.held)

    def at(self, threshold: float) -> CalibrationPoint:
        """The auto tier when the gate's `min` is `threshold`."""
        auto = [ok for p, ok in self.pairs if p >= threshold]
        return CalibrationPoint(threshold, len(auto), sum(auto), self.total)

    def curve(self) -> list[CalibrationPoint]:
        """One point per distinct p, lowest threshold (everything automatic) first."""
        ordered = sorted(self.pairs, key=lambda pair: pair[0], reverse=True)
        points: list[CalibrationPoint] = []
        correct = 0
        for i, (p, ok) in enumerate(ordered):
            correct += ok
            if i + 1 == len(ordered) or ordered[i + 1][0] != p:
                points.append(CalibrationPoint(p, i + 1, correct, self.total))
        points.reverse()
        return points

    def bins(self) -> list[dict[str, Any]]:
        """The reliability table: BINS equal bins of p over [0, 1] (the last one closed)."""
        rows: list[list[Any]] = [[0, 0.0, 0] for _ in range(BINS)]
        for p, ok in self.pairs:
            row = rows[min(BINS - 1, max(0, int(p * BINS)))]
            row[0] += 1
            row[1] += p
            row[2] += ok
        return [
            {
                "low": i / BINS,
                "high": (i + 1) / BINS,
                "count": n,
                "mean_p": total_p / n if n else None,
                "accuracy": right / n if n else None,
            }
            for i, (n, total_p, right) in enumerate(rows)
        ]

    def propose(self, target: float = DEFAULT_TARGET) -> tuple[CalibrationPoint | None, str]:
        """The lowest threshold whose auto-tier accuracy reaches `target` (the largest
        auto share that does), and a sentence: what it means, or why there is none."""
        points = self.curve()
        if not points:
            return None, f"no run of {self.node} recorded a confidence for '{self.field}' on a case that expects it"
        thin = None
        for point in points:
            if point.auto_accuracy is not None and point.auto_accuracy >= target:
                if point.auto >= MIN_CASES:
                    return point, point.sentence()
                thin = thin or point
        if thin is not None:
            return None, (
                f"no threshold is proposed: the lowest that reaches {_pct(target)} auto-tier accuracy, "
                f"{threshold_text(thin.threshold)}, has {thin.auto} case{'s' if thin.auto != 1 else ''} in its auto "
                f"tier, fewer than {MIN_CASES}; add gold cases"
            )
        best = max(points, key=lambda pt: (pt.auto_accuracy or 0.0, pt.auto))
        return None, (
            f"no threshold reaches {_pct(target)} auto-tier accuracy; the best is {_pct(best.auto_accuracy)} "
            f"at {threshold_text(best.threshold)} ({_pct(best.auto_share)} of cases)"
        )

    def to_dict(self, target: float = DEFAULT_TARGET) -> dict[str, Any]:
        proposed, sentence = self.propose(target)
        return {
            "field": self.field,
            "min": self.min,
            "source": self.source,
            "runs": len(self.pairs),
            "held_by_vote": len(self.held),
            "without_p": self.without_p,
            "skipped": self.skipped,
            "accuracy": self.accuracy,
            "bins": self.bins(),
            "curve": [
                {
                    "threshold": pt.threshold,
                    "auto": pt.auto,
                    "auto_share": pt.auto_share,
                    "auto_accuracy": pt.auto_accuracy,
                }
                for pt in self.curve()
            ],
            "target": target,
            "proposed": {**proposed.to_dict(), "reason": None}
            if proposed is not None
            else {"threshold": None, "reason": sentence},
            "current": self.at(self.min).to_dict() if self.min is not None and self.pairs else None,
        }


def calibrate(
    runs: Iterable[tuple[Trace, Mapping[str, Any]]],
    minimums: Mapping[str, float] | None = None,
    rules: Mapping[str, FieldRule] | None = None,
) -> dict[str, Calibration]:
    """Per gated node (a node whose steps recorded a confidence), its calibration over
    `runs`: each a run's trace and its case's expected values. `minimums`: each gated
    node's current `min` (`gate_minimums(pack)`), reported beside the proposal."""
    minimums = minimums or {}
    out: dict[str, Calibration] = {}
    for trace, expected in runs:
        last: dict[str, dict[str, Any]] = {}
        for step in trace.steps:
            if step.confidence is not None:
                last[step.node] = step.confidence
        for node, conf in last.items():
            # A gate on several fields records each one's value: right when all are.
            chosen = conf.get("values") or {str(conf.get("field", "")): conf.get("value")}
            cal = out.setdefault(node, Calibration(node, ", ".join(chosen), minimums.get(node)))
            if any(name not in expected for name in chosen):
                cal.skipped += 1
                continue
            right = all(_correct(rules or {}, name, expected[name], value) for name, value in chosen.items())
            p = conf.get("p")
            if conf.get("held") == "vote":
                cal.held.append(right)
                continue
            if p is None:
                cal.without_p += 1
                continue
            cal.pairs.append((float(p), right))
            cal.sources[str(conf.get("source", ""))] += 1
    for node, minimum in minimums.items():
        if node in out:
            out[node].min = minimum
    return dict(sorted(out.items()))


def gate_minimums(pack: Pack) -> dict[str, float]:
    """Each gated node's current `min` (`confidence: {field, min}` in graph.yaml)."""
    out: dict[str, float] = {}
    for node in pack.nodes.values():
        if node.confidence is not None:
            out[node.id] = node.confidence.min
    return out


def threshold_text(value: float) -> str:
    """A threshold as an author would type it (up to 4 decimals)."""
    return f"{value:.4f}".rstrip("0").rstrip(".") if value % 1 else f"{value:.1f}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}".rstrip("0").rstrip(".") + "%"


def format_calibration(calibration: Mapping[str, Mapping[str, Any]]) -> str:
    """`EvalReport.calibration()` for a terminal: per gated node, the proposal, the
    current threshold, and the reliability table's non-empty bins."""
    lines: list[str] = []
    for node, cal in calibration.items():
        source = f", p from {cal['source']}" if cal["source"] else ""
        lines.append(f"  calibration of {node}.{cal['field']} ({cal['runs']} runs{source}):")
        proposed = cal["proposed"]
        if proposed["threshold"] is None:
            lines.append(f"    target {_pct(cal['target'])}: {proposed['reason']}")
        else:
            low = _pct(proposed["accuracy_low"])
            lines.append(
                f"    target {_pct(cal['target'])}: propose min {threshold_text(proposed['threshold'])} "
                f"(95% lower bound of its accuracy {low})"
            )
            lines.append(f"      {proposed['sentence']}")
        if cal["current"] is not None:
            lines.append(f"    current min {threshold_text(cal['current']['threshold'])}:")
            lines.append(f"      {cal['current']['sentence']}")
        left_out = [
            f"{n} {what}" for n, what in ((cal["without_p"], "without p"), (cal["skipped"], "no expected value")) if n
        ]
        if left_out:
            lines.append(f"    left out: {', '.join(left_out)}")
        lines.append("    p          runs  mean p  accuracy")
        for b in cal["bins"]:
            if b["count"]:
                span = f"{b['low']:.1f}-{b['high']:.1f}"
                lines.append(f"    {span:<9} {b['count']:>5}  {b['mean_p']:>6.3f}  {_pct(b['accuracy']):>8}")
    return "\n".join(lines)
