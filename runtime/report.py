"""Text renderings: the eval report for a terminal, the graph as Mermaid."""

from __future__ import annotations

import json
from typing import Any

from runtime.eval_report import EvalReport
from runtime.nodes import drawing_for
from runtime.pack.model import Pack
from runtime.trace import TIER_WORDS


def format_report(report: EvalReport, gate: list[dict[str, Any]] | None = None) -> str:
    lines = [f"{report.pack} v{report.version}: {report.passed}/{report.total} cases passed (model {report.model})"]
    held = report.held_out()
    if held is not None:
        lines[0] += f"; held out (not tagged {report.train_tag!r}): {held[0]}/{held[1]}"
    lines += _scores(report)
    for case in report.cases:
        if case.passed:
            continue
        if case.diverged:
            run = f" run {case.repeat}" if report.repeats > 1 else ""
            lines.append(f"  DIVERGED {case.case_id}{run}: not scored; its tool calls left the recording")
            lines.extend(f"    {reason}" for reason in case.diverged)
            continue
        run = f" run {case.repeat}" if report.repeats > 1 else ""
        tier = TIER_WORDS.get(case.tier, case.tier)
        lines.append(f"  FAIL {case.case_id}{run} [{case.blamed or '?'}] (run {case.status}, tier {tier})")
        for d in case.diffs:
            got = "(not written)" if d.missing else json.dumps(d.actual)
            lines.append(f"    {d.field}: expected {json.dumps(d.expected)}, got {got}")
        for problem in case.problems:
            lines.append(f"    {problem}")
        if case.committed:
            lines.append(f"    committed before it stopped: {json.dumps(case.committed, sort_keys=True, default=str)}")
    lines.extend(_consistency_lines(report))
    by_node = report.failures_by_node()
    if by_node:
        lines.append("  failures by node: " + ", ".join(f"{n}={c}" for n, c in by_node.items()))
    cov = report.coverage()
    lines.append(f"  branch coverage: {cov['taken']}/{cov['total']} edges taken")
    for name in cov["untaken"]:
        lines.append(f"    untaken: {name}")
    t = report.tiers()
    acc = "n/a" if t["auto_accuracy"] is None else f"{100 * t['auto_accuracy']:.1f}%"
    if t["auto_accuracy"] is not None:
        acc += f"; trivial baseline {_pct(report.trivial_baseline('auto')['pass_rate'])}"
    lines.append(
        f"  tiers: auto {t['auto']} (accuracy {acc}), escalated {t['escalated']}, {TIER_WORDS['failed']} {t['failed']}"
    )
    lines.extend(_tier_model_lines(report))
    if report.tape is not None:
        rec = report.tool_recording()
        lines.append(
            f"  tool recording ({rec['mode']}): {rec['live']} live tool calls, {rec['replayed']} replayed, "
            f"{rec['diverged']} diverged run{'s' if rec['diverged'] != 1 else ''}"
        )
    lines.extend(tool_lines(report))
    pc = report.per_case()
    m = report.metrics()
    tokens = pc["prompt_tokens"]["mean"] + pc["completion_tokens"]["mean"] + pc["reasoning_tokens"]["mean"]
    lines.append(
        f"  per case: {pc['generations']['mean']:.2f} generations, {tokens:.0f} tokens, "
        f"latency p50 {1000 * pc['latency_s']['p50']:.1f} ms / p95 {1000 * pc['latency_s']['p95']:.1f} ms, "
        f"cost ${pc['cost_usd']['mean']:.6f}; schema violations {100 * m['schema_violation_rate']:.1f}% of generations"
    )
    if pc["cached_tokens"]["mean"]:
        read = pc["prompt_tokens"]["mean"] - pc["cached_tokens"]["mean"]
        lines.append(
            f"  prompt per case: {pc['prompt_tokens']['mean']:.0f} tokens, {read:.0f} read by the server, "
            f"{pc['cached_tokens']['mean']:.0f} from its prompt cache"
        )
    if gate is not None:
        verdict = "passed" if all(r["ok"] for r in gate) else "REGRESSION"
        lines.append(f"  baseline gate: {verdict}")
        for r in gate:
            mark = "ok " if r["ok"] else "BAD"
            lines.append(
                f"    {mark} {r['metric']}: {r['current']:.4g} (baseline {r['baseline']:.4g}, limit {r['limit']:.4g})"
            )
    return "\n".join(lines)


def _tier_model_lines(report: EvalReport) -> list[str]:
    """With model tiers: per tier, the cases it settled and what was spent on it."""
    if not report.ladder:
        return []
    lines = ["  tiers by model (cases settled, passed; escalations out; spend):"]
    for name, row in report.tiers_by_model().items():
        line = f"    {name}: settled {row['cases']} ({row['passed']} passed)"
        if "model_calls" in row:
            up = row["escalations"]
            tokens = row["prompt_tokens"] + row["completion_tokens"] + row["reasoning_tokens"]
            line += (
                f"; escalated {up['fail'] + up['unsure']} (fail {up['fail']}, unsure {up['unsure']}); "
                f"{row['model_calls']} model calls, {tokens} tokens, ${row['cost_usd']:.6f}"
            )
        lines.append(line)
    return lines


def tool_lines(report: EvalReport) -> list[str]:
    """Tool use (docs/eval-report.md): totals, then one row per tool. Nothing when the
    runs called no tool and chose none."""
    t = report.tool_metrics()
    if not t["tool_calls"] and not t["model_calls"]:
        return []
    precision = "n/a" if t["precision"] is None else f"{t['precision']:.2f}"
    lines = [
        f"  tools: {t['tool_calls']} calls, {t['model_calls']} model calls to choose, "
        f"{t['invalid_choices']} invalid choices, {t['repeats']} repeats; tool precision {precision} "
        f"({t['matched_calls']}/{t['scored_calls']} calls expected by the gold path, {t['cases_scored']} cases)"
    ]
    width = max(4, *(len(name) for name in t["per_tool"]))
    lines.append(f"    {'tool':<{width}}  calls  precision  invalid  repeats")
    for name, row in t["per_tool"].items():
        p = "n/a" if row["precision"] is None else f"{row['precision']:.2f}"
        lines.append(f"    {name:<{width}}  {row['calls']:>5}  {p:>9}  {row['invalid']:>7}  {row['repeats']:>7}")
    return lines


def _pct(v: float) -> str:
    return f"{100 * v:.0f}%"


def _scores(report: EvalReport) -> list[str]:
    """Every score beside the trivial baseline's (docs/eval-report.md), then one row per field."""
    base = report.trivial_baseline()
    n = report.total
    lines = [
        f"  pass {report.passed}/{n} ({_pct(report.passed / n if n else 0.0)}; "
        f"trivial baseline {_pct(base['pass_rate'])}), mean score {report.mean_score():.2f} "
        f"(trivial baseline {base['mean_score']:.2f})"
    ]
    table = report.field_table()
    if not table:
        return lines
    width = max(5, *(len(name) for name in table))
    lines.append(f"  {'field':<{width}}  compare  accuracy  baseline  F1 micro/macro (baseline)")
    for name, row in table.items():
        f1 = ""
        if "f1_micro" in row:
            f1 = (
                f"{row['f1_micro']:.2f}/{row['f1_macro']:.2f} "
                f"({row['baseline_f1_micro']:.2f}/{row['baseline_f1_macro']:.2f})"
            )
        lines.append(
            f"  {name:<{width}}  {row['compare']:<7}  {_pct(row['accuracy']):>8}  "
            f"{_pct(row['baseline_accuracy']):>8}  {f1}".rstrip()
        )
    return lines


def _consistency_lines(report: EvalReport) -> list[str]:
    """With --repeats K: how many cases passed all, some or none of their K runs, and
    which cases were inconsistent."""
    if report.repeats <= 1:
        return []
    c = report.consistency()
    lines = [
        f"  repeats: {report.repeats} runs per case (counts above are runs); {c['always']} cases passed every run, "
        f"{c['sometimes']} some, {c['never']} none"
    ]
    for case_id, row in c["cases"].items():
        if 0 < row["passed"] < row["runs"]:
            lines.append(f"    inconsistent: {case_id} passed {row['passed']}/{row['runs']}")
    return lines


def _label(text: str) -> str:
    return text.replace('"', "#quot;").replace("|", "#124;")


def mermaid(pack: Pack) -> str:
    lines = ["flowchart TD"]
    for node in pack.nodes.values():
        drawing = drawing_for(node.kind)
        left, right = drawing.mermaid
        lines.append(f"  {node.id}{left}{_label(node.id)}<br/><small>{drawing.label}</small>{right}")
    for e in pack.edges:
        if e.kind == "next":
            arrow = f'-->|"{_label(e.when.source)}"|' if e.when is not None else "-->"
        else:
            arrow = f"-.->|{e.kind}|"
        lines.append(f"  {e.source} {arrow} {e.target}")
    return "\n".join(lines)
