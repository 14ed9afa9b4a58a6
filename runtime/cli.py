"""The `packforge` command line. Bad input of any kind: one line on stderr, exit 2."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.backends import open_backend
from runtime.checkpoint import CheckpointStore, MemoryStore, SQLiteStore
from runtime.errors import OutputRejected, PackforgeError, PackInvalid
from runtime.logs import configure_logging
from runtime.pack import Pack, load_pack
from runtime.progress import EvalProgress
from runtime.tiers import Tier
from runtime.tools import load_tools
from runtime.walker import RunResult, resume_run, run_pack

if TYPE_CHECKING:
    from runtime.evaluate import EvalReport
    from runtime.recordings import ToolTape

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_WAITING = 0, 1, 2, 3
EXIT_GATE_FAILED = 4  # eval --baseline: a metric regressed beyond its tolerance

EVAL_EPILOG = """exit status: 0 every case passed, or with --baseline the gate passed (even if some
cases failed); 1 some cases failed or diverged from --replay-tools (no --baseline);
4 the baseline gate failed; 2 bad usage or a bad pack."""


class UsageError(PackforgeError):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse's own errors: one line, exit 2
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    # Global options are accepted before or after the subcommand.
    common = _Parser(add_help=False)
    common.add_argument("--log-level", default=argparse.SUPPRESS, choices=["debug", "info", "warning", "error"])
    common.add_argument("--log-format", default=argparse.SUPPRESS, choices=["text", "json"])
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    parser = _Parser(prog="packforge", description="Run LLM workflow packs reliably on small models.", parents=[common])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def add_command(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, parents=[common])

    p = add_command("validate", "check a pack and report every problem")
    p.add_argument("pack")
    p.add_argument("--tools", help="MODULE:REGISTRY of host tools to check tool names against")
    p.add_argument(
        "--endpoint",
        metavar="SPEC",
        help="warn per node about schema keywords this endpoint's grammar mode does not enforce",
    )

    p = add_command("run", "run a pack on one input")
    p.add_argument("pack")
    p.add_argument("--input", help="the input as JSON, or @FILE")
    p.add_argument("--model", help="model spec (default: the manifest's model)")
    _add_escalate_option(p)
    p.add_argument("--tools", help="MODULE:REGISTRY: a dict of tool name -> function")
    p.add_argument("--db", help="SQLite checkpoint file (default: in memory, not resumable)")
    p.add_argument("--sync", default="normal", choices=["normal", "full"], help="SQLite synchronous mode")
    p.add_argument("--run-id", help="id for a new run")
    p.add_argument("--resume", metavar="RUN_ID", help="continue a killed or waiting run (needs --db)")
    p.add_argument("--answer", help="JSON (or @FILE) answering the node a run waits at")
    p.add_argument("--answered-by", metavar="WHO", help="who gave --answer (provenance, e.g. human:alice)")
    p.add_argument("--trace", help="write the run's trace as JSON to this file")

    p = add_command("eval", "score a pack against its evalset")
    p.description, p.epilog = "Score a pack against its evalset.", EVAL_EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("pack")
    p.add_argument("--model")
    _add_escalate_option(p)
    p.add_argument("--tools")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--tags", help="only cases with any of these comma-separated tags")
    p.add_argument("--json", action="store_true", help="print the report as one JSON document")
    p.add_argument("--baseline", help="gate on this baseline file: exit 4 on a regression, else 0")
    p.add_argument("--write-baseline", metavar="FILE", help="write this run's metrics as a baseline")
    p.add_argument(
        "--record-tools", metavar="FILE", help="record every tool call's result to FILE (JSONL) for --replay-tools"
    )
    p.add_argument(
        "--replay-tools",
        metavar="FILE",
        help="answer tool calls from a --record-tools FILE, calling no tool; a case that calls otherwise is 'diverged'",
    )
    _add_long_eval_options(p)
    p.add_argument("--target-auto-accuracy", type=float, default=0.95, metavar="P", help="for calibration")

    p = add_command("graph", "print the pack's graph as Mermaid text")
    p.add_argument("pack")

    p = add_command("endpoints", "check a model endpoint")
    endpoints = p.add_subparsers(dest="endpoints_command", metavar="check", required=True, parser_class=_Parser)
    c = endpoints.add_parser(
        "check", parents=[common], help="one call: does it answer, does it honour a schema, how fast (exit 0/1)"
    )
    c.add_argument("spec", help="openai:BASE_URL#MODEL[;key=value...] (docs/endpoints.md)")
    c.add_argument("--json", action="store_true", help="print the result as one JSON document")

    p = add_command("mcp", "serve packs as MCP tools over stdio (docs/tools.md, MCP)")
    p.add_argument("--pack", action="append", required=True, metavar="DIR", help="a pack to serve (repeat for more)")
    p.add_argument("--model", help="model spec for every pack (default: each manifest's model)")
    p.add_argument("--tools", help="MODULE:REGISTRY of host tools the packs call")
    p.add_argument("--expose-tools", action="store_true", help="also serve the registry's available tools")
    p.add_argument(
        "--checkpoints",
        metavar="DIR",
        default="var/mcp",
        help="where runs are checkpointed (DIR/runs.sqlite) and traced (DIR/traces/RUN_ID.json); default var/mcp",
    )
    p = add_command("tools", "show the host's tool registry")
    tools = p.add_subparsers(dest="tools_command", metavar="list", required=True, parser_class=_Parser)
    c = tools.add_parser(
        "list", parents=[common], help="each tool: state, side effects, description, arguments (docs/tools.md)"
    )
    c.add_argument("--tools", help="MODULE:REGISTRY (default: $PACKFORGE_TOOLS)")
    c.add_argument("--json", action="store_true", help="print the catalogue as one JSON document")

    p = add_command("pull", "download a pack version from a studio (docs/api.md)")
    p.add_argument("target", metavar="STUDIO_URL/PROJECT", help="e.g. http://localhost:8000/triage")
    p.add_argument("--version", dest="pack_version", metavar="SHA", help="a commit sha or prefix (default: the head)")
    p.add_argument("--out", metavar="DIR", help="where to unpack (default: ./PROJECT)")
    p.add_argument("--token", help="API token (default: $PACKFORGE_TOKEN, which keeps it out of the process list)")
    p.add_argument("--format", default="tar.gz", choices=["tar.gz", "zip"], help="archive to download")
    p.add_argument("--force", action="store_true", help="replace the contents of a non-empty DIR")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        args = build_parser().parse_args(argv)
        configure_logging(getattr(args, "log_level", "warning"), getattr(args, "log_format", "text"))
        handler = {
            "validate": cmd_validate,
            "run": cmd_run,
            "eval": cmd_eval,
            "graph": cmd_graph,
            "endpoints": cmd_endpoints,
            "pull": cmd_pull,
            "mcp": cmd_mcp,
            "tools": cmd_tools,
        }[args.command]
        return handler(args)
    except PackInvalid as exc:
        n = len(exc.issues)
        print(f"error: pack is invalid ({n} problem{'s' if n != 1 else ''}):", file=sys.stderr)
        for issue in exc.issues:
            print(f"  {issue}", file=sys.stderr)
        return EXIT_USAGE
    except PackforgeError as exc:
        if debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # a bug: still one line unless --debug
        if debug:
            raise
        print(f"error: internal error ({type(exc).__name__}: {exc}); rerun with --debug for details", file=sys.stderr)
        return EXIT_USAGE


def _json_arg(value: str, what: str) -> Any:
    text = value
    if value.startswith("@"):
        try:
            text = Path(value[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"{what}: cannot read {value[1:]}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None


def _backend(pack: Pack, spec: str | None) -> Any:
    chosen = spec or pack.model
    if not chosen:
        raise UsageError("no model: pass --model SPEC or set 'model' in the manifest")
    return open_backend(chosen, base_dir=pack.root, default=pack.model)


def _add_escalate_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--escalate-to",
        action="append",
        default=[],
        metavar="[NAME=]SPEC",
        help="a larger model tier a node climbs to when it fails or is unsure (repeat, small to large; "
        "docs/tiers.md); the tier is named NAME, or by its spec",
    )


def _tiers(pack: Pack, args: argparse.Namespace, backend: Any) -> list[Tier] | None:
    """The model tiers of --model and each --escalate-to (None without --escalate-to);
    their backends, tier 0's aside, are opened here and closed by the caller."""
    if not args.escalate_to:
        return None
    tiers = [Tier(args.model or pack.model or backend.spec, backend)]
    for raw in args.escalate_to:
        name, _, spec = raw.partition("=") if _named(raw) else (raw, "", raw)
        if not spec:
            raise UsageError(f"--escalate-to {raw!r}: give a model spec, or NAME=SPEC")
        if any(t.name == name for t in tiers) or name == "person":
            raise UsageError(f"--escalate-to: tier name {name!r} is used twice (or is 'person'); use NAME=SPEC")
        tiers.append(Tier(name, open_backend(spec, base_dir=pack.root, default=pack.model)))
    return tiers


def _named(raw: str) -> bool:
    """Whether `raw` is NAME=SPEC: a plain name before the first '=' (a spec such as
    openai:URL#m;key=v has ':' before it)."""
    head, sep, _ = raw.partition("=")
    return bool(sep) and bool(head) and all(ch.isalnum() or ch in "-_." for ch in head)


def _close_tiers(tiers: list[Tier] | None) -> None:
    for tier in (tiers or [])[1:]:
        tier.backend.close()


def cmd_validate(args: argparse.Namespace) -> int:
    tools = load_tools(args.tools)
    pack = load_pack(args.pack, tools=set(tools) if tools is not None else None)
    print(
        f"{pack.name} v{pack.version}: {len(pack.nodes)} nodes, {len(pack.edges)} edges, "
        f"{len(pack.cases)} evalset cases, entry '{pack.entry}'"
    )
    if pack.tools and tools is None:
        print(f"note: tools {', '.join(pack.tools)} were not checked against a registry (pass --tools)")
    if args.endpoint:
        from runtime.endpoints import lint_pack

        warnings = lint_pack(pack, args.endpoint)
        for warning in warnings:
            print(f"warning: {warning}")
        if not warnings:
            print("schema lint: no warnings; the endpoint's grammar mode enforces every keyword used")
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    tools = load_tools(args.tools)
    pack = load_pack(args.pack, tools=set(tools or {}))
    store: CheckpointStore = SQLiteStore(args.db, synchronous=args.sync) if args.db else MemoryStore()
    backend = _backend(pack, args.model)
    tiers: list[Tier] | None = None
    try:
        tiers = _tiers(pack, args, backend)
        if args.resume:
            if not args.db:
                raise UsageError("--resume needs --db, the checkpoint file the run was started with")
            answers = {}
            if args.answer is not None:
                waiting_at = _waiting_node(store, args.resume)
                answers[waiting_at] = _json_arg(args.answer, "--answer")
                _check_answer(pack, waiting_at, answers[waiting_at])
            try:
                result = resume_run(
                    pack,
                    args.resume,
                    backend=backend,
                    store=store,
                    tools=tools,
                    answers=answers,
                    tiers=tiers,
                    answered_by=args.answered_by,
                )
            except OutputRejected as exc:
                raise UsageError(f"--answer was refused (the run still waits): {'; '.join(exc.reasons)}") from None
        else:
            if args.input is None:
                raise UsageError("run needs --input JSON (or @FILE), or --resume RUN_ID")
            value = _json_arg(args.input, "--input")
            if not isinstance(value, dict):
                raise UsageError("--input must be a JSON object")
            result = run_pack(pack, value, backend=backend, tools=tools, store=store, run_id=args.run_id, tiers=tiers)
    finally:
        backend.close()
        _close_tiers(tiers)
        store.close()
    if args.trace:
        Path(args.trace).write_text(json.dumps(result.trace.to_dict(), indent=2, default=str), encoding="utf-8")
    return _report_run(result, args)


def _waiting_node(store: CheckpointStore, run_id: str) -> str:
    record = store.get(run_id)
    if record.status != "waiting":
        raise UsageError(f"run '{run_id}' is {record.status}, not waiting for an answer; drop --answer")
    waiting = (record.result or {}).get("waiting_at")
    if not isinstance(waiting, str):
        raise UsageError(f"run '{run_id}' does not record which node it waits at")
    return waiting


def _check_answer(pack: Pack, node_id: str, answer: Any) -> None:
    from runtime.verify import describe_schema_error

    node = pack.nodes[node_id]
    if node.validator is not None:
        for error in node.validator.iter_errors(answer):
            raise UsageError(f"--answer does not match grammars/{node_id}.json: {describe_schema_error(error)}")


def _report_run(result: RunResult, args: argparse.Namespace) -> int:
    if result.status == "done":
        print(json.dumps(result.output, sort_keys=True))
        return EXIT_OK
    if result.status == "waiting":
        tools = f" --tools {args.tools}" if args.tools else ""
        last = result.trace.steps[-1] if result.trace.steps else None
        question = last.prompt if last is not None else ""
        if question:
            print(f"question: {question.strip()}", file=sys.stderr)
        where = "human node" if result.waiting_reason != "escalated" else "node"
        if result.waiting_reason == "escalated" and last is not None:
            for e in last.escalations:
                print(f"escalated: {e['from']} -> {e['to']}: {e['reason']}", file=sys.stderr)
        print(
            f"waiting at {where} '{result.waiting_at}' (run {result.run_id}); resume with: "
            f"packforge run {args.pack}{tools} --db {args.db or 'FILE'} --resume {result.run_id} --answer JSON",
            file=sys.stderr,
        )
        return EXIT_WAITING
    print(f"run {result.run_id} {result.status}: {result.trace.error}", file=sys.stderr)
    return EXIT_FAILED


def _add_long_eval_options(p: argparse.ArgumentParser) -> None:
    """eval's options for long evals: progress, repeats, traces."""
    shown = p.add_mutually_exclusive_group()
    shown.add_argument(
        "--progress",
        action="store_true",
        default=None,
        help="show progress on stderr (default: only when stderr is a terminal)",
    )
    shown.add_argument("--no-progress", dest="progress", action="store_false", help="never show progress")
    p.add_argument("--repeats", type=int, default=1, metavar="K", help="run every case K times (default 1)")
    p.add_argument("--traces", action="store_true", help="with --json: include each case's trace")
    p.add_argument(
        "--rejected-text",
        action="store_true",
        help="with --traces: keep the text of rejected model answers (blanked by default)",
    )


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


def cmd_eval(args: argparse.Namespace) -> int:
    from runtime.calibration import format_calibration
    from runtime.evaluate import baseline_document, check_baseline, evaluate, select_cases
    from runtime.report import format_report

    _check_long_eval_options(args)
    tools = load_tools(args.tools)
    pack = load_pack(args.pack, tools=set(tools or {}))
    if args.concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    if not 0 < args.target_auto_accuracy <= 1:
        raise UsageError("--target-auto-accuracy must be above 0 and at most 1")
    baseline = _json_arg(f"@{args.baseline}", "--baseline") if args.baseline else None
    backend = _backend(pack, args.model)
    tags = set(args.tags.split(",")) if args.tags else None
    progress = _eval_progress(args, len(select_cases(pack, tags)) * args.repeats)
    tiers: list[Tier] | None = None
    tape = _tape(args)
    try:
        tiers = _tiers(pack, args, backend)
        report = evaluate(
            pack,
            backend,
            tools=tools,
            concurrency=args.concurrency,
            tags=tags,
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
        _close_tiers(tiers)
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


def cmd_endpoints(args: argparse.Namespace) -> int:
    from runtime.endpoints import check_endpoint

    result = check_endpoint(args.spec)
    print(json.dumps(result.to_dict(), indent=2) if args.json else "\n".join(result.lines()))
    return EXIT_OK if result.ok else EXIT_FAILED


def cmd_mcp(args: argparse.Namespace) -> int:
    from runtime.mcp_server import pack_entry, registry_entries, require_sdk, serve_stdio

    require_sdk()
    if args.expose_tools and not args.tools:
        raise UsageError("--expose-tools needs --tools MODULE:REGISTRY")
    tools = load_tools(args.tools)
    checkpoints = Path(args.checkpoints)
    entries = [
        pack_entry(load_pack(d, tools=set(tools or {})), model=args.model, checkpoints=checkpoints, tools=tools)
        for d in args.pack
    ]
    if args.expose_tools and tools:
        entries += registry_entries(tools)
    serve_stdio(entries)  # stdout is the protocol's: nothing else may print there
    return EXIT_OK


def cmd_tools(args: argparse.Namespace) -> int:
    """`packforge tools list`: the registry's catalogue. A tool whose dependency is
    missing is listed as unavailable, not an error (exit 0)."""
    ref = args.tools or os.environ.get("PACKFORGE_TOOLS", "").strip() or None
    if ref is None:
        raise UsageError("packforge tools list: name a registry with --tools MODULE:REGISTRY (or set PACKFORGE_TOOLS)")
    registry = load_tools(ref)
    assert registry is not None
    if args.json:
        print(json.dumps({"registry": ref, "tools": registry.catalogue()}, indent=2))
        return EXIT_OK
    rows = [(t["name"], t["state"], "side effects" if t["side_effects"] else "read-only") for t in registry.catalogue()]
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(("tool", "state", "effects"))]
    print("  ".join(h.ljust(w) for h, w in zip(("tool", "state", "effects"), widths, strict=True)) + "  description")
    for row, entry in zip(rows, registry.catalogue(), strict=True):
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) + "  " + entry["description"])
        print(" " * 4 + "args: " + entry["args_summary"])
    unavailable = sum(1 for t in registry.values() if not t.available)
    n = len(registry)
    print(f"{n} tool{'s' if n != 1 else ''} in {ref}: {n - unavailable} available, {unavailable} unavailable")
    return EXIT_OK


def cmd_pull(args: argparse.Namespace) -> int:
    from runtime.pull import pull

    pulled = pull(
        args.target, token=args.token, version=args.pack_version, out=args.out, force=args.force, fmt=args.format
    )
    print(pulled.summary())
    return EXIT_OK


def cmd_graph(args: argparse.Namespace) -> int:
    from runtime.report import mermaid

    print(mermaid(load_pack(args.pack)))
    return EXIT_OK
