"""The compiler's command line, for now `python -m compiler check SPEC_DIR`: every problem
of a spec folder on stderr with its file and line (exit 2), or a one-line summary (exit 0).

It is not `packforge spec check` because the runtime's CLI may not import the compiler
(runtime never imports compiler); `packforge build` will join them when it exists."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from compiler.errors import SpecInvalid
from compiler.spec import Spec, load_spec

EXIT_OK, EXIT_USAGE = 0, 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compiler", description="Packforge compiler")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="load a spec folder (spec.yaml + gold.jsonl) and report every problem")
    check.add_argument("spec_dir", metavar="SPEC_DIR")
    args = parser.parse_args(argv)
    try:
        spec = load_spec(args.spec_dir)
    except SpecInvalid as exc:
        n = len(exc.issues)
        print(f"error: spec is invalid ({n} problem{'s' if n != 1 else ''}):", file=sys.stderr)
        for issue in exc.issues:
            print(f"  {issue}", file=sys.stderr)
        return EXIT_USAGE
    print(summary(spec))
    return EXIT_OK


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
