"""`packforge`: the compiler's commands (`build`, `check`) and, for every other command,
the runtime's CLI unchanged (the runtime may not import the compiler, so the console
script points here and hands on).

- `packforge build SPEC_DIR -o PACK_DIR [--planner rules|openai:URL#MODEL|recorded:PATH]
  [--target MODEL_SPEC] [--tools MODULE:REGISTRY] [--scorers MODULE:SCORERS] [--attempts N]
  [--work DIR] [--json]`:
  compile a spec into a pack (docs/compiler.md, "The loop", "The verdict"). Progress
  lines on stderr, then the verdict table; exit 0 only when the pack beats both the
  trivial baseline and one call on the target's validation split; 1 when it does not
  (one call won: its pack is written; or neither beat the baseline), when nothing was
  judged on a model (no target), or when the build was cancelled; 2 on a bad spec or
  bad usage (a spec output compared `scorer:NAME` without --scorers, or with a registry
  that lacks NAME, included).
- `packforge check SPEC_DIR [--scorers MODULE:SCORERS]` (also `python -m compiler check`):
  every problem of a spec folder on stderr with its file and line (exit 2), or a
  one-line summary (exit 0); with --scorers, scorer names are checked against it."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import signal
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from compiler.errors import CompilerError, SpecInvalid
from compiler.loop import BuildResult, Progress, build
from compiler.planners import make_planner
from compiler.report import verdict_table
from compiler.spec import Spec, load_spec
from runtime import PackforgeError, Scorer, cli_main, load_scorers, load_tools

EXIT_OK, EXIT_SHORT, EXIT_USAGE = 0, 1, 2
COMMANDS = ("build", "check")
_VALUED_GLOBALS = ("--log-level", "--log-format")  # the runtime's global options that take a value

COMPILER_HELP = """
compiler commands:
  build               compile a spec folder into a pack: plan, emit, evaluate, re-plan
  check               load a spec folder (spec.yaml + gold.jsonl) and report every problem
  (packforge build --help, packforge check --help for their options)
"""


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2, as the runtime's CLI does
        raise _UsageError(f"{self.prog}: {message}")


def main(argv: Sequence[str] | None = None) -> int:
    """`packforge`: build / check here, anything else to the runtime's CLI."""
    args = list(sys.argv[1:] if argv is None else argv)
    command = _command(args)
    if command not in COMMANDS:
        if command is None and any(a in ("-h", "--help") for a in args):
            return _help(args)
        return cli_main(args)
    try:
        parsed = _parser().parse_args(args)
    except _UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return int(parsed.run(parsed))


def _command(args: list[str]) -> str | None:
    """The first argument that is not a global option (or its value)."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in _VALUED_GLOBALS:
            skip = True
        elif not arg.startswith("-"):
            return arg
    return None


def _help(args: list[str]) -> int:
    """The runtime's help, then the compiler's commands."""
    text = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(text):
        try:
            code = cli_main(args)
        except SystemExit as exc:  # argparse's help action exits after printing
            code = int(exc.code or 0)
    sys.stdout.write(text.getvalue().rstrip("\n") + "\n" + COMPILER_HELP)
    return code


def _parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    for name in _VALUED_GLOBALS:
        common.add_argument(name, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    parser = _Parser(prog="packforge", description="Packforge compiler", parents=[common])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    check = commands.add_parser(
        "check", help="load a spec folder (spec.yaml + gold.jsonl) and report every problem", parents=[common]
    )
    check.add_argument("spec_dir", metavar="SPEC_DIR")
    check.add_argument("--scorers", metavar="MODULE:SCORERS", help="host scorers to check scorer names against")
    check.set_defaults(run=cmd_check)

    b = commands.add_parser("build", help="compile a spec folder into a pack", parents=[common])
    b.add_argument("spec_dir", metavar="SPEC_DIR")
    b.add_argument("-o", "--out", metavar="PACK_DIR", required=True, help="where the best pack is written")
    b.add_argument(
        "--planner",
        default="rules",
        metavar="PLANNER",
        help="rules (model-free, the default), openai:URL#MODEL, or recorded:PATH (a plan .json or a folder of 1.json, 2.json, ...)",
    )
    b.add_argument(
        "--target",
        metavar="MODEL_SPEC",
        help="the small model the pack will run on (default: the spec's model): the search and the verdict run on it",
    )
    b.add_argument("--budget", type=int, metavar="N", help="at most N target calls (default: budgets.target_calls)")
    b.add_argument(
        "--cache", metavar="DIR", help="the target-call cache (default: WORK/cache); share it between builds"
    )
    b.add_argument("--concurrency", type=int, default=4, metavar="N", help="target calls in flight (default 4)")
    b.add_argument("--tools", metavar="MODULE:REGISTRY", help="the host tools the spec names")
    b.add_argument(
        "--scorers",
        metavar="MODULE:SCORERS",
        help="the host scorers the spec's outputs are compared by (compare: scorer:NAME)",
    )
    b.add_argument("--attempts", type=int, metavar="N", help="at most N attempts (default: the spec's budget)")
    b.add_argument("--work", metavar="DIR", help="the work dir (default: PACK_DIR.build); an existing one is resumed")
    b.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    b.set_defaults(run=cmd_build)
    return parser


def _load(spec_dir: str, scorers_ref: str | None = None) -> tuple[Spec | None, Mapping[str, Scorer] | None]:
    """The spec and the host's scorer registry `scorers_ref` names (scorer names checked
    against it); (None, None) after printing why when either does not load."""
    try:
        scorers = load_scorers(scorers_ref)
    except PackforgeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None, None
    try:
        return load_spec(spec_dir, scorers=scorers), scorers
    except SpecInvalid as exc:
        n = len(exc.issues)
        print(f"error: spec is invalid ({n} problem{'s' if n != 1 else ''}):", file=sys.stderr)
        for issue in exc.issues:
            print(f"  {issue}", file=sys.stderr)
        return None, None


def cmd_check(args: argparse.Namespace) -> int:
    spec, _ = _load(args.spec_dir, args.scorers)
    if spec is None:
        return EXIT_USAGE
    print(summary(spec))
    return EXIT_OK


def cmd_build(args: argparse.Namespace) -> int:
    spec, scorers = _load(args.spec_dir, args.scorers)
    if spec is None:
        return EXIT_USAGE
    for name in ("attempts", "budget", "concurrency"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            print(f"error: --{name} must be 1 or more", file=sys.stderr)
            return EXIT_USAGE
    out = Path(args.out)
    work = Path(args.work) if args.work else out.with_name(out.name + ".build")
    try:
        tools = load_tools(args.tools)
        if spec.tools and tools is None:
            raise CompilerError(
                f"the spec names tools ({', '.join(spec.tools)}): pass --tools MODULE:REGISTRY with their functions"
            )
        planner = make_planner(args.planner, tools_ref=args.tools)
        with _cancel_on_interrupt() as cancel:
            result = build(
                spec,
                planner,
                work,
                out=out,
                target=args.target or spec.model,
                tools=tools,
                attempts=args.attempts,
                cancel=cancel,
                on_progress=_print_progress,
                cache=Path(args.cache) if args.cache else None,
                budget=args.budget,
                concurrency=args.concurrency,
                scorers=scorers,
            )
    except (CompilerError, PackforgeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(result_document(result, spec, work), indent=2))
    else:
        print(result_line(result, spec))
        if result.verdict is not None:
            print(verdict_table(result.verdict))
    if result.verdict is None or result.stopped == "cancelled":
        return EXIT_SHORT
    return result.verdict.exit_code


@contextlib.contextmanager
def _cancel_on_interrupt() -> Iterator[threading.Event]:
    """Ctrl-C sets the build's cancel event (the loop stops at the next stage and records
    the attempt as cancelled); a second Ctrl-C interrupts at once."""
    cancel = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield cancel
        return

    def interrupted(signum: int, frame: FrameType | None) -> None:
        if cancel.is_set():
            raise KeyboardInterrupt
        print("cancelling: the build stops after this stage (Ctrl-C again to stop now)", file=sys.stderr)
        cancel.set()

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        yield cancel
    finally:
        signal.signal(signal.SIGINT, previous)


def _print_progress(p: Progress) -> None:
    scores = ""
    if p.offline_score is not None:
        scores += f" offline={p.offline_score:.2f}"
    if p.target_score is not None:
        scores += f" target={p.target_score:.2f}"
    tokens = f" tokens={p.tokens}" if p.tokens else ""
    print(f"[attempt {p.attempt}] {p.stage}: {p.message}{scores}{tokens}", file=sys.stderr, flush=True)


def result_line(result: BuildResult, spec: Spec) -> str:
    """The summary a person reads: which attempt won, whether it scores full marks."""
    n = len(result.attempts)
    if result.best is None:
        return f"{spec.name}: no attempt of {n} produced a pack that loads (stopped: {result.stopped}); nothing written"
    best = result.attempts[result.best - 1]
    scores = f"offline {best.offline_score:.2f}" + (
        f", target {best.target_score:.2f}" if best.target_score is not None else ""
    )
    verdict = "full marks" if result.full_marks else "NOT full marks"
    where = f"written to {result.out}" if result.out is not None else "not written"
    return (
        f"{spec.name}: best attempt {best.number} of {n} made, {scores}: {verdict} (stopped: {result.stopped}); {where}"
    )


def result_document(result: BuildResult, spec: Spec, work: Path) -> dict[str, Any]:
    return {
        "spec": spec.name,
        "best": result.best,
        "full_marks": result.full_marks,
        "stopped": result.stopped,
        "out": str(result.out) if result.out is not None else None,
        "work": str(work),
        "attempts": [r.to_dict() for r in result.attempts],
        "verdict": result.verdict.document if result.verdict is not None else None,
    }


def summary(spec: Spec) -> str:
    """One line: what the spec declares and how many gold cases it has."""
    expressions = sum(1 for r in spec.rules if r.expr is not None)
    end = f"unsure end '{spec.unsure_end}'" if spec.unsure_end else "no unsure end"
    return (
        f"{spec.name}: {_count(len(spec.inputs), 'input')}, {_count(len(spec.outputs), 'output')}, "
        f"{_count(len(spec.tools), 'tool')}, {_count(len(spec.rules), 'rule')} ({expressions} as {'an expression' if expressions == 1 else 'expressions'}), "
        f"{end}, {_count(len(spec.gold), 'gold case')}"
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
