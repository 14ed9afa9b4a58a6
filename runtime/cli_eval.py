"""The `packforge eval` command: score a pack against its evalset, with progress, tool
recordings, the baseline gate, and the report as text or JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.cli_common import (
    EXIT_FAILED,
    EXIT_GATE_FAILED,
    EXIT_OK,
    UsageError,
    backend_for,
    close_tiers,
    json_arg,
    tiers_from_args,
)
from runtime.pack import load_pack
from runtime.progress import EvalProgress
from runtime.scorers import load_scorers
from runtime.tiers import Tier
from runtime.tools import load_tools

if TYPE_CHECKING:
    from runtime.evaluate import EvalReport
    from runtime.recordings import ToolTape


def _check_long_eval_options(args: argparse.Namespace) -> None:
    if args.repeats < 1:
        raise UsageError("--repeats must be at least 1")
    if args.traces and not args.json:
        raise UsageError("--traces adds traces to the --json report; add --json")
    if args.rejected_text and not args.traces:
        raise UsageError("--rejected-text applies to --traces; add --traces")


def _eval_progress(args: argparse.Namespace, total: int) -> EvalProgress | None:
    """The stderr progress line: on when stderr is a terminal, unless --progress or
    --no-progress says otherwise."""
    tty = sys.stderr.isatty()
    if not (tty if args.progress is None else args.progress):
        return None
    return EvalProgress(total, sys.stderr, in_place=tty)


def _eval_exit_code(report: EvalReport, gate: list[dict[str, Any]] | None) -> int:
    """With --baseline the gate decides (4 when it failed); else 1 when any case failed
    or diverged from a replayed tool recording."""
    if gate is not None:
        return EXIT_OK if all(r["ok"] for r in gate) else EXIT_GATE_FAILED
    diverged = len(report.cases) - report.total
    return EXIT_OK if report.passed == report.total and not diverged else EXIT_FAILED


def _tape(args: argparse.Namespace) -> ToolTape | None:
    """--record-tools FILE (a tape written when the eval ends) or --replay-tools FILE."""
    from runtime.recordings import ToolTape

    if args.record_tools and args.replay_tools:
        raise UsageError("give --record-tools or --replay-tools, not both")
    if args.replay_tools:
        return ToolTape.load(args.replay_tools)
    if args.record_tools:
        return ToolTape("record")
    return None


def _warn_concurrency(asked: int, backend: Any) -> None:
    """Say so when the eval would keep more cases going than the endpoint takes calls:
    the rest wait for a slot (bounded by the endpoint's queue_wait, not its deadline)."""
    config = getattr(backend, "config", None)
    cap = getattr(config, "concurrency", None)
    if isinstance(cap, int) and asked > cap:
        print(
            f"warning: --concurrency {asked} is above the endpoint's concurrency={cap}; {asked - cap} case(s) at a "
            f"time will wait for a slot. Lower --concurrency to {cap}, or raise the endpoint's concurrency if the "
            f"server serves that many at once (llama-server: -np)",
            file=sys.stderr,
        )


def cmd_eval(args: argparse.Namespace) -> int:
    from runtime.calibration import format_calibration
    from runtime.evaluate import baseline_document, check_baseline, evaluate, select_cases
    from runtime.report import format_report

    _check_long_eval_options(args)
    tools = load_tools(args.tools)
    pack = load_pack(args.pack, tools=set(tools or {}), scorers=load_scorers(args.scorers))
    unbound = sorted(f"{r.name} (scorer:{r.scorer})" for r in pack.fields.values() if r.compare == "scorer")
    if unbound and args.scorers is None:
        raise UsageError(f"the pack compares {', '.join(unbound)} with host scorers: give --scorers MODULE:SCORERS")
    if args.concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    if not 0 < args.target_auto_accuracy <= 1:
        raise UsageError("--target-auto-accuracy must be above 0 and at most 1")
    baseline = json_arg(f"@{args.baseline}", "--baseline") if args.baseline else None
    backend = backend_for(pack, args.model)
    tags = set(filter(None, args.tags.split(","))) if args.tags else None
    exclude = set(filter(None, args.exclude_tags.split(","))) if args.exclude_tags else None
    picked = select_cases(pack, tags, exclude_tags=exclude, untagged=args.untagged)
    if not picked:
        raise UsageError("no evalset case is selected by --tags/--untagged/--exclude-tags")
    _warn_concurrency(args.concurrency, backend)
    progress = _eval_progress(args, len(picked) * args.repeats)
    tiers: list[Tier] | None = None
    tape = _tape(args)
    try:
        tiers = tiers_from_args(pack, args, backend)
        report = evaluate(
            pack,
            backend,
            tools=tools,
            concurrency=args.concurrency,
            tags=tags,
            exclude_tags=exclude,
            untagged=args.untagged,
            model=args.model or pack.model,
            repeats=args.repeats,
            on_case=(lambda case: progress.update(case.passed)) if progress is not None else None,
            tiers=tiers,
            tape=tape,
        )
        if tape is not None and tape.mode == "record":
            tape.save(args.record_tools)
    finally:
        backend.close()
        close_tiers(tiers)
        if progress is not None:
            progress.finish()
    gate = check_baseline(report.metrics(), baseline) if baseline is not None else None
    if args.write_baseline:
        Path(args.write_baseline).write_text(json.dumps(baseline_document(report), indent=2) + "\n", encoding="utf-8")
    if args.json:
        doc = report.to_dict(
            traces=args.traces, rejected_text=args.rejected_text, target_auto_accuracy=args.target_auto_accuracy
        )
        if gate is not None:
            doc["gate"] = {"ok": all(r["ok"] for r in gate), "rows": gate}  # "baseline" is the trivial baseline
        print(json.dumps(doc, indent=2, default=str))
    else:
        print(format_report(report, gate))
        if calibration := report.calibration(args.target_auto_accuracy):
            print(format_calibration(calibration))
    return _eval_exit_code(report, gate)
