"""The `packforge` command line: its arguments and the dispatch to each command
(runtime.cli_run: validate, run, graph; runtime.cli_eval: eval; runtime.cli_host:
endpoints, mcp, tools, pull). Bad input of any kind: one line on stderr, exit 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from runtime.cli_common import EXIT_USAGE, UsageError
from runtime.cli_eval import cmd_eval
from runtime.cli_host import cmd_endpoints, cmd_mcp, cmd_pull, cmd_tools
from runtime.cli_run import cmd_graph, cmd_run, cmd_validate
from runtime.errors import PackforgeError, PackInvalid
from runtime.logs import configure_logging
from runtime.tools import load_tools as load_tools  # importable from here, as before

EVAL_EPILOG = """exit status: 0 every case passed, or with --baseline the gate passed (even if some
cases failed); 1 some cases failed or diverged from --replay-tools (no --baseline);
4 the baseline gate failed; 2 bad usage or a bad pack."""


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
    p.add_argument("--scorers", help="MODULE:SCORERS of host scorers to check scorer names against")
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
    p.add_argument("--scorers", help="MODULE:SCORERS: a dict of scorer name -> function (compare: scorer:NAME)")
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
    p.add_argument("--scorers", help="MODULE:SCORERS: a dict of scorer name -> function (compare: scorer:NAME)")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--tags", help="only cases with any of these comma-separated tags")
    p.add_argument("--untagged", action="store_true", help="only cases with no tag (with --tags: those too)")
    p.add_argument("--exclude-tags", metavar="TAGS", help="leave out cases with any of these comma-separated tags")
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


def _add_escalate_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--escalate-to",
        action="append",
        default=[],
        metavar="[NAME=]SPEC",
        help="a larger model tier a node climbs to when it fails or is unsure (repeat, small to large; "
        "docs/tiers.md); the tier is named NAME, or by its spec",
    )


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
