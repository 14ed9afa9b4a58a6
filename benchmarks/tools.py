"""Tool use on a real small model: the choose_tool pack against one unconstrained call.

Task: packs/calculator's evalset (arithmetic and unit conversion with five host tools:
add, subtract, multiply, divide, convert), the cases whose gold run ends with an answer
and needs no person (c-14 and c-15, the divide-by-zero escalations, are left out: one
call cannot escalate).

Model: SmolLM2-135M-Instruct (Q4_1) on llama.cpp's own llama-server, fetched and started
by tests/support/model_servers.py (or --url for a server already running).

Arms, on the same cases:
  (a) pack      packs/calculator run by the runtime's evaluator (`runtime.evaluate`):
                a choose_tool loop (grammar built from the tools' schemas, verified
                choices, at most 3 calls, repeat guard) then a generate node for the
                final number, also under its grammar (grammar=gbnf: llama-server's
                compact grammar, as benchmarks/real_models.py sends it)
  (b) one call  one call of the same model, no grammar, with the same tool descriptions
                and argument schemas in the prompt, asked for one tool call as JSON
                {"tool": NAME, "args": {...}}, at most 96 tokens. The reply's first {...}
                that parses is the call; it is made (when the tool accepts the arguments) and its result is
                the answer.

Per arm: pass rate (the answer equals the gold within the pack's tolerance, and a pack
run ended `done`), model calls per case, and tool precision (of the calls made, the
share the case's gold `tools` expected; per tool, up to the times the gold makes it).

    .venv/bin/python benchmarks/tools.py [--limit N] [--url http://127.0.0.1:PORT/v1] [--arms pack,one_call]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._rows import write_rows
from runtime import Backend, ModelCall, load_pack, load_tools, open_backend
from runtime.evaluate import evaluate
from runtime.pack.fields import rule_for, values_match
from runtime.pack.model import Case, Pack
from runtime.stats import wilson_interval
from runtime.tools import Registry, args_problem

HERE = Path(__file__).resolve().parent
PACK = HERE.parent / "packs" / "calculator"
RESULTS = HERE / "results" / "tools.jsonl"
ARMS = ("pack", "one_call")
# A tool call is about 30 tokens of JSON; an unconstrained small model often writes prose
# or code instead, and this bounds what a case can cost. A call cut off past it is looked
# for in what was written.
ONE_CALL_MAX_TOKENS = 96
ONE_CALL_PROMPT = """Question: {question}

You can call one of these tools:
{tools}

Reply with the one tool call that answers the question, as JSON: {{"tool": NAME, "args": {{...}}}}."""


def benchmark_cases(pack: Pack) -> list[Case]:
    return [c for c in pack.cases if c.end == "done" and not c.human and "answer" in c.expected]


def spread(cases: list[Case], limit: int | None) -> list[Case]:
    if not limit or limit >= len(cases):
        return cases
    return [cases[(i * len(cases)) // limit] for i in range(limit)]


def matched(made: list[str], gold: tuple[str, ...]) -> int:
    want, got = Counter(gold), Counter(made)
    return sum(min(n, want[t]) for t, n in got.items())


def run_pack_arm(pack: Pack, cases: list[Case], backend: Backend, tools: Registry) -> list[dict[str, Any]]:
    ids = {c.id for c in cases}
    report = evaluate(pack, backend, tools=tools, concurrency=2, model="smollm2")
    rows = []
    for c in report.cases:
        if c.case_id not in ids:
            continue
        made = [t.tool for t in c.trace.tool_calls]
        stats = c.trace.tool_stats
        rows.append(
            {
                "arm": "pack",
                "case": c.case_id,
                "passed": c.passed,
                "status": c.status,
                "answer": c.output.get("answer"),
                "expected": c.expected.get("answer"),
                "model_calls": int(c.totals["model_calls"]),
                "tools_made": made,
                "tools_gold": list(c.gold_tools or ()),
                "matched": matched(made, c.gold_tools or ()),
                "invalid_choices": stats["invalid_choices"],
                "repeats": stats["repeats"],
                "stop": next((s.tool_stats["stop"] for s in c.trace.steps if s.tool_stats), None),
            }
        )
    return rows


def catalogue(tools: Registry) -> str:
    """The tools as the pack's {{ tools }} lists them (name, description, argument schema)."""
    return "\n".join(
        f"- {name}: {t.description} Arguments: {json.dumps(t.args, sort_keys=True, separators=(',', ':'))}"
        for name, t in tools.items()
    )


def first_json_object(text: str) -> Any:
    """The first {...} in `text` that parses as JSON, or None (the arm has no grammar)."""
    decoder = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch == "{":
            try:
                value, _ = decoder.raw_decode(text, i)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                return value
    return None


def run_one_call_arm(pack: Pack, cases: list[Case], backend: Backend, tools: Registry) -> list[dict[str, Any]]:
    rows = []
    listing = catalogue(tools)
    rule = rule_for(pack.fields, "answer")
    for case in cases:
        prompt = ONE_CALL_PROMPT.format(question=case.input["question"], tools=listing)
        call = ModelCall(
            run_id=f"one-{case.id}",
            node="one_call",
            attempt=1,
            messages=[{"role": "user", "content": prompt}],
            schema=None,
            max_tokens=ONE_CALL_MAX_TOKENS,
            temperature=0.0,
            case_id=case.id,
            input=case.input,
        )
        reply = backend.complete(call)
        parsed = first_json_object(reply.text)
        made: list[str] = []
        answer: Any = None
        problem = None
        if not isinstance(parsed, dict) or not isinstance(parsed.get("tool"), str):
            problem = "no tool call in the reply"
        elif parsed["tool"] not in tools:
            problem = "unknown tool"
        elif not isinstance(parsed.get("args"), dict):
            problem = "no args object"
        else:
            tool = tools[parsed["tool"]]
            problem = args_problem(tool, parsed["args"])  # the same checks the pack's calls pass
            if problem is None:
                made = [parsed["tool"]]
                try:
                    result = tool.function(**parsed["args"])
                    answer = result.get("result") if isinstance(result, dict) else None
                except Exception as exc:  # the tool refused what the model wrote
                    problem = f"the call failed: {type(exc).__name__}"
        passed = answer is not None and values_match(rule, case.expected["answer"], answer)
        rows.append(
            {
                "arm": "one_call",
                "case": case.id,
                "passed": passed,
                "status": "done" if problem is None else "unparsed",
                "answer": answer,
                "expected": case.expected["answer"],
                "model_calls": 1,
                "tools_made": made,
                "tools_gold": list(case.tools or ()),
                "matched": matched(made, case.tools or ()),
                "problem": problem,
                "reply": reply.text[:400],
            }
        )
    return rows


def summarise(arm: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    passed = sum(r["passed"] for r in rows)
    made = sum(len(r["tools_made"]) for r in rows)
    good = sum(r["matched"] for r in rows)
    lo, hi = wilson_interval(passed, n)
    return {
        "arm": arm,
        "cases": n,
        "passed": passed,
        "pass_rate": passed / n if n else 0.0,
        "ci95": [lo, hi],
        "model_calls_per_case": sum(r["model_calls"] for r in rows) / n if n else 0.0,
        "tool_calls": made,
        "tool_precision": good / made if made else None,
        "invalid_choices": sum(r.get("invalid_choices", 0) for r in rows),
        "repeats": sum(r.get("repeats", 0) for r in rows),
    }


def print_table(summaries: list[dict[str, Any]]) -> None:
    print("| arm | cases | pass rate (95% CI) | model calls / case | tool calls | tool precision |")
    print("|---|---|---|---|---|---|")
    for s in summaries:
        precision = "n/a" if s["tool_precision"] is None else f"{s['tool_precision']:.2f}"
        print(
            f"| {s['arm']} | {s['cases']} | {100 * s['pass_rate']:.0f}% ({100 * s['ci95'][0]:.0f}–{100 * s['ci95'][1]:.0f}%) "
            f"| {s['model_calls_per_case']:.2f} | {s['tool_calls']} | {precision} |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--limit", type=int, default=None, help="N cases spread over the evalset")
    parser.add_argument("--url", default=None, help="a running OpenAI-compatible server (…/v1) serving SmolLM2")
    args = parser.parse_args(argv)
    arms = [a for a in args.arms.split(",") if a]
    for arm in arms:
        if arm not in ARMS:
            parser.error(f"unknown arm {arm!r}; known: {', '.join(ARMS)}")
    tools = load_tools(f"{PACK / 'tools.py'}:registry")
    assert tools is not None
    pack = load_pack(PACK, tools=set(tools))
    cases = spread(benchmark_cases(pack), args.limit)
    pack.cases = cases  # the evaluator runs exactly these

    server = None
    url = args.url
    if url is None:
        from tests.support import model_servers  # the tests' fetch-and-start helper

        server = model_servers.start_smollm2_server(Path(tempfile.mkdtemp(prefix="tools-bench-")))
        url = server.base_url
    grammar = open_backend(f"openai:{url}#smollm2;grammar=gbnf;concurrency=2;attempts=2;timeout=600;deadline=900")
    free = open_backend(f"openai:{url}#smollm2;grammar=none;attempts=2;timeout=600;deadline=900")
    rows: list[dict[str, Any]] = []
    summaries = []
    started = time.monotonic()
    try:
        for arm in arms:
            got = (
                run_pack_arm(pack, cases, grammar, tools)
                if arm == "pack"
                else run_one_call_arm(pack, cases, free, tools)
            )
            rows.extend({**r, "model": "SmolLM2-135M-Instruct Q4_1", "server": "llama-server"} for r in got)
            summaries.append(summarise(arm, got))
    finally:
        grammar.close()
        free.close()
        if server is not None:
            server.stop()
    print(f"packs/calculator, {len(cases)} cases, SmolLM2-135M-Instruct on llama-server\n")
    print_table(summaries)
    print(f"\n{time.monotonic() - started:.0f}s; raw rows in {RESULTS.relative_to(HERE.parent)}")
    write_rows(RESULTS, [*rows, *({"summary": s} for s in summaries)])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
