"""Which few-shot layout should the routing pack's nodes use? One node at a time, on
SmolLM2-135M-Instruct (llama-server, as benchmarks/real_models.py starts it), greedy.

Each variant answers one node of benchmarks/packs/helpdesk_routing for every gold case:
the department node from the message, or the sub-issue node from the message and the
case's gold department (so a sub-issue variant is judged on its own step, not on the
department step's mistakes). Messages are built by the runtime (runtime.messages) with
the node's `examples:` replaced by the variant's; the grammar is the node's enum (the
sub-issue's: its department's labels). Variants:

  department  3 any        the department node as the pack has it
  department  2 any        two nearest examples instead of three
  subissue    3 any        three nearest examples of any department (the pack until now)
  subissue    2 any / 2 same / 1 same / 3 same
                           N nearest, of any department or only of the gold department
                           (`examples.match: [department]`, docs/pack-format.md)
  shared                   one conversation for both nodes: one system prompt with both
                           label lists, the department node's three nearest examples
                           answered with both labels, and only the last request differs,
                           so the second node's call (made right after the
                           first, per case) reads just its request

Per variant: exact with its 95% Wilson interval, and the prompt tokens the server read
per call (llama-server's `timings.prompt_n`; a node's first call, which reads the system
prompt, is left out). A fresh server per variant, so none finds another's prompts in
its cache. Rows: benchmarks/results/routing_layouts.jsonl.

    .venv/bin/python benchmarks/routing_layouts.py [--limit N] [--variant NAME]... [--rows FILE]
                                                   [--from-rows FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import real_models
from benchmarks._rows import read_rows, write_rows
from runtime import load_pack, wilson_interval
from runtime.fewshot import choose
from runtime.messages import build_messages, compact
from runtime.pack.model import Node, Pack
from tests.support.model_servers import start_smollm2_server

TASK = "helpdesk_routing"
PACK = real_models.PACKS / TASK
RESULTS = Path(__file__).resolve().parent / "results" / "routing_layouts.jsonl"
Messages = list[dict[str, str]]
Build = Callable[[dict[str, Any]], Messages]


def variants() -> dict[str, list[tuple[str, Build]]]:
    """name -> the calls it makes per case, in order: (the node answered, how its
    messages are built)."""
    pack = load_pack(PACK)
    department, subissue = pack.nodes["department"], pack.nodes["subissue"]
    assert department.examples is not None and subissue.examples is not None
    out: dict[str, list[tuple[str, Build]]] = {
        "department, 3 any": [("department", lambda case: build_messages(pack, department, {}, case["input"]).messages)]
    }
    two = dataclasses.replace(department, examples=dataclasses.replace(department.examples, count=2))
    out["department, 2 any"] = [("department", lambda case: build_messages(pack, two, {}, case["input"]).messages)]
    for count, match in ((3, ()), (2, ()), (2, ("department",)), (1, ("department",)), (3, ("department",))):
        node = dataclasses.replace(subissue, examples=dataclasses.replace(subissue.examples, count=count, match=match))
        name = f"subissue, {count} {'same' if match else 'any'}"
        out[name] = [("subissue", _subissue(pack, node))]
    system = _shared_system()

    def shared(case: dict[str, Any], node: str) -> Messages:
        messages = [{"role": "system", "content": system}]
        for example in choose(department.examples, case["input"]):  # type: ignore[arg-type]
            messages.append({"role": "user", "content": "Message: " + example.input["message"]})
            messages.append({"role": "assistant", "content": compact(example.expected)})
        ask = "Department?" if node == "department" else f"Department: {case['expected']['department']}\nSub-issue?"
        messages.append({"role": "user", "content": f"Message: {case['input']['message']}\n{ask}"})
        return messages

    out["shared"] = [
        ("department", lambda case: shared(case, "department")),
        ("subissue", lambda case: shared(case, "subissue")),
    ]
    return out


def _subissue(pack: Pack, node: Node) -> Build:
    """The sub-issue node's messages on the case's gold department."""
    return lambda case: (
        build_messages(pack, node, {"department": case["expected"]["department"]}, case["input"]).messages
    )


def _shared_system() -> str:
    """Both label lists in one system prompt (the pack's two, without their first and
    last lines)."""
    department = (PACK / "system_department.txt").read_text().strip().splitlines()
    subissue = (PACK / "system_subissue.txt").read_text().strip().splitlines()
    return "\n".join(
        [
            "You are the helpdesk router of an online shop. You read one customer message and name its "
            "department and sub-issue.",
            "Departments:",
            *department[1:-1],
            "Sub-issues per department:",
            *subissue[1:-1],
            "Answer with one JSON object and nothing else.",
        ]
    )


def schema(node: str, case: dict[str, Any], labels: dict[str, list[str]]) -> dict[str, Any]:
    allowed = list(labels) if node == "department" else labels[case["expected"]["department"]]
    return {
        "type": "object",
        "properties": {node: {"enum": allowed}},
        "required": [node],
        "additionalProperties": False,
    }


def run_variant(
    name: str, steps: list[tuple[str, Build]], cases: list[dict[str, Any]], log_dir: Path
) -> list[dict[str, Any]]:
    labels = yaml.safe_load((PACK / "labels" / "subissues.yaml").read_text())
    server = start_smollm2_server(log_dir)
    rows = []
    try:
        with httpx.Client(timeout=120) as client:
            for case, (node, build) in ((c, step) for c in cases for step in steps):
                body = {
                    "messages": build(case),
                    "max_tokens": 32,
                    "temperature": 0,
                    "cache_prompt": True,
                    "json_schema": schema(node, case, labels),
                }
                started = time.perf_counter()
                reply = client.post(server.base_url + "/chat/completions", json=body)
                reply.raise_for_status()
                answer = reply.json()
                got = json.loads(answer["choices"][0]["message"]["content"]).get(node)
                rows.append(
                    {
                        "variant": name,
                        "node": node,
                        "case": case["id"],
                        "expected": case["expected"][node],
                        "got": got,
                        "exact": got == case["expected"][node],
                        "prompt_read": answer["timings"]["prompt_n"],
                        "cached": answer["timings"].get("cache_n", 0),
                        "seconds": round(time.perf_counter() - started, 3),
                    }
                )
    finally:
        server.stop()
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    names = list(dict.fromkeys((r["variant"], r["node"]) for r in rows))
    print(f"{'variant':<22} {'node':<11} {'exact [95% CI]':<24} {'prompt read/call':>16} {'s/call':>7}")
    for name, node in names:
        mine = [r for r in rows if r["variant"] == name and r["node"] == node]
        right = sum(r["exact"] for r in mine)
        low, high = wilson_interval(right, len(mine))
        read = statistics.mean(r["prompt_read"] for r in mine[1:]) if len(mine) > 1 else mine[0]["prompt_read"]
        seconds = statistics.mean(r["seconds"] for r in mine[1:]) if len(mine) > 1 else mine[0]["seconds"]
        exact = f"{right / len(mine):6.1%} [{low:.1%}-{high:.1%}]"
        print(f"{name:<22} {node:<11} {exact:<24} {read:>16.0f} {seconds:>7.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=None, help="N cases, spread over the evalset")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME",
        help="only this variant (repeatable; names as printed)",
    )
    parser.add_argument(
        "--rows", metavar="FILE", default=str(RESULTS), help=f"where the rows go (default {RESULTS.name})"
    )
    parser.add_argument("--from-rows", metavar="FILE", help="re-print the table from a rows file; no model is called")
    args = parser.parse_args(argv)
    if args.from_rows:
        print_table(read_rows(Path(args.from_rows)))
        return 0
    cases = real_models.spread(real_models.load_task(TASK).cases, args.limit)
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    chosen = variants()
    if args.variant:
        wanted = args.variant
        unknown = [v for v in wanted if v not in chosen]
        if unknown:
            parser.error(f"unknown variant(s) {unknown}; known: {', '.join(chosen)}")
        chosen = {name: chosen[name] for name in wanted}
    out = Path(args.rows)
    with tempfile.TemporaryDirectory(prefix="routing-layouts-") as tmp:
        for name, steps in chosen.items():
            rows += run_variant(name, steps, cases, Path(tmp))
            write_rows(out, rows)
    print(f"{TASK}: {len(cases)} cases, {time.perf_counter() - started:.0f} s; rows in {out}")
    print_table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
