"""The `packforge` commands on one pack: validate, run (a new run or --resume), graph."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from runtime.checkpoint import CheckpointStore, MemoryStore, SQLiteStore
from runtime.cli_common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_WAITING,
    UsageError,
    backend_for,
    close_tiers,
    json_arg,
    tiers_from_args,
)
from runtime.errors import OutputRejected
from runtime.pack import Pack, load_pack
from runtime.pack.enums import enum_problems
from runtime.scorers import load_scorers
from runtime.tiers import Tier
from runtime.tools import load_tools
from runtime.walker import RunResult, resume_run, run_pack


def cmd_validate(args: argparse.Namespace) -> int:
    tools = load_tools(args.tools)
    pack = load_pack(args.pack, tools=set(tools) if tools is not None else None, scorers=load_scorers(args.scorers))
    print(
        f"{pack.name} v{pack.version}: {len(pack.nodes)} nodes, {len(pack.edges)} edges, "
        f"{len(pack.cases)} evalset cases, entry '{pack.entry}'"
    )
    if pack.tools and tools is None:
        print(f"note: tools {', '.join(pack.tools)} were not checked against a registry (pass --tools)")
    for issue in enum_problems(pack):
        print(f"warning: {issue}")
    if args.endpoint:
        from runtime.endpoints import fit_pack, lint_pack

        warnings = lint_pack(pack, args.endpoint)
        for warning in warnings:
            print(f"warning: {warning}")
        if not warnings:
            print("schema lint: no warnings; the endpoint's grammar mode enforces every keyword used")
        fit = fit_pack(pack, args.endpoint)
        for line in fit.warnings:
            print(f"warning: {line}")
        if fit.more:
            print(f"warning: {fit.more} more requests do not fit (the first {len(fit.warnings)} are above)")
        if fit.note:
            print(f"note: {fit.note}")
        elif not fit.warnings:
            print(
                f"context: every evalset case fits ({fit.counted} requests counted by the server, "
                f"{fit.context} tokens a slot)"
            )
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    tools = load_tools(args.tools)
    pack = load_pack(args.pack, tools=set(tools or {}), scorers=load_scorers(args.scorers))
    voted = {f for n in pack.nodes.values() if getattr(n, "samples", 1) > 1 for f in (n.agree_on or n.writes)}
    unbound = sorted(r.name for r in pack.fields.values() if r.compare == "scorer" and r.name in voted)
    if unbound and args.scorers is None:
        raise UsageError(f"draws vote on {', '.join(unbound)} with a host scorer: give --scorers MODULE:SCORERS")
    store: CheckpointStore = SQLiteStore(args.db, synchronous=args.sync) if args.db else MemoryStore()
    backend = backend_for(pack, args.model)
    tiers: list[Tier] | None = None
    try:
        tiers = tiers_from_args(pack, args, backend)
        if args.resume:
            if not args.db:
                raise UsageError("--resume needs --db, the checkpoint file the run was started with")
            answers = {}
            if args.answer is not None:
                waiting_at = _waiting_node(store, args.resume)
                answers[waiting_at] = json_arg(args.answer, "--answer")
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
            value = json_arg(args.input, "--input")
            if not isinstance(value, dict):
                raise UsageError("--input must be a JSON object")
            result = run_pack(pack, value, backend=backend, tools=tools, store=store, run_id=args.run_id, tiers=tiers)
    finally:
        backend.close()
        close_tiers(tiers)
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


def cmd_graph(args: argparse.Namespace) -> int:
    from runtime.report import mermaid

    print(mermaid(load_pack(args.pack)))
    return EXIT_OK
