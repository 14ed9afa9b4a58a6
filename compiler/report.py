"""The verdict as one table for a person (the CLI prints it after the build's line)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compiler.judge import Verdict

ARM_NAMES = (
    ("pack", "compiled pack"),
    ("one_call", "best one call"),
    ("baseline", "trivial baseline"),
    ("nearest", "nearest case"),
)


def _pct(x: Any) -> str:
    return "-" if x is None else f"{100 * float(x):.1f}%"


def _arm_row(label: str, arm: Mapping[str, Any] | None) -> str:
    if not arm:
        return f"  {label:<17} {'n/a':>10}"
    val, test = arm.get("validation") or {}, arm.get("test") or {}
    ci = test.get("ci") or [None, None]
    shown_ci = f"[{_pct(ci[0])}, {_pct(ci[1])}]" if ci[0] is not None else ""
    tokens = arm.get("tokens_per_case")
    calls = arm.get("calls_per_case")
    return (
        f"  {label:<17} {_pct(val.get('accuracy')):>10} {_pct(test.get('accuracy')):>9} {shown_ci:<17}"
        f" {'-' if tokens is None else f'{tokens:.0f}':>8} {'-' if calls is None else f'{calls:.2f}':>6}"
    )


def verdict_table(verdict: Verdict) -> str:
    doc = verdict.document
    if not doc.get("judged"):
        return f"verdict: {verdict.sentence} (exit {verdict.exit_code})"
    split = doc.get("split") or {}
    lines = [
        f"verdict on {doc.get('target')}: split {split.get('method')} train {split.get('train')}, "
        f"validation {split.get('validation')}, test {split.get('test')}",
        f"  {'arm':<17} {'validation':>10} {'test':>9} {'test 95% CI':<17} {'tokens':>8} {'calls':>6}   (per case)",
    ]
    arms = doc.get("arms") or {}
    lines += [_arm_row(label, arms.get(key)) for key, label in ARM_NAMES]
    m = doc.get("mcnemar")
    if m:
        lines.append(
            f"  McNemar pack vs one call on {m['cases']} test cases: {m['fixed']} fixed, {m['broken']} broken, p={m['p']}"
        )
    auto = doc.get("auto") or {}
    if auto:
        t = auto.get("test") or {}
        if auto.get("threshold") is not None:
            lines.append(
                f"  auto tier: confidence >= {auto['threshold']:.3g}: test share {_pct(t.get('share'))}, accuracy "
                f"{_pct(t.get('accuracy'))} (one call on the same cases {_pct(t.get('one_call_accuracy'))})"
            )
        lines.append(f"  auto tier: {auto.get('reason')}")
    cost = doc.get("cost") or {}
    lines.append(
        f"  cost: {cost.get('target_calls', 0)} target calls ({cost.get('cached_calls', 0)} answered from the cache), "
        f"{cost.get('tokens', 0)} tokens; budget {cost.get('budget')}"
    )
    if cost.get("proposal_requests"):
        lines.append(
            f"  instruction proposals: {cost['proposal_requests']} planner requests, "
            f"{cost.get('proposal_tokens', 0)} planner tokens"
        )
    context = doc.get("context") or {}
    rule = context.get("rule") or {}
    if rule:
        lines.append(
            f"  context: {rule.get('sentence')}; {context.get('truncated_cases')} cases cut, "
            f"{context.get('overflow_after_rule')} still overflow, {context.get('passed_after_rule')} pass"
        )
    elif context.get("overflow_cases"):
        lines.append(f"  context: {context['overflow_cases']} cases did not fit the target's context")
    unseen = doc.get("unseen_labels") or {}
    if unseen:
        lines.append(
            "  labels train never shows: " + "; ".join(f"{k}: {', '.join(map(str, v))}" for k, v in unseen.items())
        )
    lines.append(f"verdict: {verdict.sentence} (exit {verdict.exit_code})")
    return "\n".join(lines)


__all__ = ["verdict_table"]
