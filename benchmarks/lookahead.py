"""Independent nodes side by side (runtime.lookahead) on a real small model: does a case
finish sooner, and does it commit the same answers?

The pack: the shipping-details benchmark pack (benchmarks/packs/shipping_details) split
into two nodes that both read only the email: `recipient` (name) then `address`
(street, city, postcode, country), one greedy draw each (temperature 0), each with its
two nearest examples, the pack's one system prompt first. Arms, on the same cases, one
case at a time (what a user waiting on one run sees), each on a freshly started
llama-server (SmolLM2-135M-Instruct, -np 2 -t 2, so no arm finds another's prompts in
its cache):

  split              the two nodes one after the other (endpoint lookahead=0)
  split, lookahead   `address`'s call made while `recipient` runs (lookahead=1)
  one node           the five fields from one node (the benchmark pack at one greedy draw)

Per arm: exact (every field right, the pack's `fields:` rules) with a 95% Wilson
interval, wall seconds per case (median and mean), the model time the calls add up to,
prompt tokens the server read, and how many cases committed the same answers as the
split arm. Rows: benchmarks/results/lookahead.jsonl.

    .venv/bin/python benchmarks/lookahead.py [--limit N] [--arms split,lookahead,one_node]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import real_models
from benchmarks._rows import read_rows, write_rows
from runtime import load_pack, run_pack, wilson_interval
from runtime.backends import open_backend

TASK = "shipping_details"
RESULTS = Path(__file__).resolve().parent / "results" / "lookahead.jsonl"
ARMS = {"split": ("split", 0), "lookahead": ("split", 1), "one_node": ("one_node", 0)}
LABELS = {"split": "split", "lookahead": "split, lookahead", "one_node": "one node"}
NODES = {"recipient": ["name"], "address": ["street", "city", "postcode", "country"]}
PROMPTS = {"recipient": "Email: {{ input.email }}\nRecipient?\n", "address": "Email: {{ input.email }}\nAddress?\n"}


def write_packs(folder: Path) -> dict[str, Path]:
    """The split variant and the one-node variant of the benchmark pack, greedy."""
    source = real_models.PACKS / TASK
    one = folder / "one_node"
    shutil.copytree(source, one)
    graph = yaml.safe_load((one / "graph.yaml").read_text())
    extract = graph["nodes"]["extract"]
    for key in ("samples", "agree", "agree_on"):
        extract.pop(key, None)
    extract["temperature"] = 0.0
    graph["edges"] = [e for e in graph["edges"] if "on_unsure" not in e]
    (one / "graph.yaml").write_text(yaml.safe_dump(graph, sort_keys=False))

    split = folder / "split"
    shutil.copytree(source, split)
    schema = json.loads((source / "grammars" / "extract.json").read_text())
    examples = [json.loads(line) for line in (source / "examples.jsonl").read_text().splitlines() if line.strip()]
    nodes: dict[str, Any] = {}
    for node_id, writes in NODES.items():
        nodes[node_id] = {
            "kind": "generate",
            "reads": ["input.email"],
            "writes": writes,
            "temperature": 0.0,
            "examples": {"file": f"examples_{node_id}.jsonl", "count": 2, "strategy": "nearest"},
            "max_tokens": 48 if node_id == "recipient" else 96,
        }
        own = {**schema, "properties": {w: schema["properties"][w] for w in writes}, "required": writes}
        (split / "grammars" / f"{node_id}.json").write_text(json.dumps(own, indent=2))
        (split / "prompts" / f"{node_id}.txt").write_text(PROMPTS[node_id])
        rows = [{**e, "expected": {w: e["expected"][w] for w in writes}} for e in examples]
        (split / f"examples_{node_id}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (split / "grammars" / "extract.json").unlink()
    (split / "prompts" / "extract.txt").unlink()
    (split / "examples.jsonl").unlink()
    nodes.update({n: graph["nodes"][n] for n in ("ready", "escalate")})
    edges = [
        {"from": "recipient", "to": "address"},
        {"from": "recipient", "on_fail": "escalate"},
        {"from": "address", "to": "ready"},
        {"from": "address", "on_fail": "escalate"},
    ]
    (split / "graph.yaml").write_text(yaml.safe_dump({"nodes": nodes, "edges": edges}, sort_keys=False))
    manifest = yaml.safe_load((split / "manifest.yaml").read_text())
    manifest["entry"] = "recipient"
    (split / "manifest.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return {"split": split, "one_node": one}


def run_arm(arm: str, root: Path, lookahead: int, cases: list[dict[str, Any]], log_dir: Path) -> list[dict[str, Any]]:
    task = real_models.load_task(TASK)
    pack = load_pack(root)
    server = real_models.start_server("smollm2", log_dir)
    options = "concurrency=2;slots=2;grammar=gbnf" + (f";lookahead={lookahead}" if lookahead else "")
    backend = open_backend(f"openai:{server.base_url}#smollm2;{options}")
    rows = []
    try:
        for case in cases:
            started = time.perf_counter()
            result = run_pack(pack, case["input"], backend=backend, case_id=case["id"])
            wall = time.perf_counter() - started
            got = {f: result.state[f] for f in task.fields if f in result.state}
            exact, share = real_models.score(task, case["expected"], got)
            totals = result.trace.totals()
            rows.append(
                {
                    "arm": arm,
                    "case": case["id"],
                    "status": result.status,
                    "got": got,
                    "exact": exact,
                    "share": share,
                    "wall_s": round(wall, 4),
                    "model_s": round(float(totals["latency_s"]), 4),
                    "prompt_tokens": int(totals["prompt_tokens"]),
                    "cached_tokens": int(totals["cached_tokens"]),
                    "calls": len(result.trace.attempts),
                    "ahead": sum(1 for a in result.trace.attempts if a.request_id.endswith("a")),
                }
            )
    finally:
        backend.close()
        server.stop()
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    by_arm: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_arm.setdefault(row["arm"], []).append(row)
    split = {r["case"]: r["got"] for r in by_arm.get("split", [])}
    base = statistics.mean(r["wall_s"] for r in by_arm["split"]) if "split" in by_arm else None
    print(
        "| arm | exact [95% CI] | wall s/case (median) | mean | vs split | model s/case | prompt read | calls | same as split |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for arm, arm_rows in by_arm.items():
        n, k = len(arm_rows), sum(r["exact"] for r in arm_rows)
        lo, hi = wilson_interval(k, n)
        walls = [r["wall_s"] for r in arm_rows]
        mean = statistics.mean(walls)
        read = statistics.mean(r["prompt_tokens"] - r["cached_tokens"] for r in arm_rows)
        same = sum(1 for r in arm_rows if split.get(r["case"]) == r["got"]) if arm != "one_node" and split else None
        print(
            f"| {LABELS[arm]} | {k / n:.1%} [{lo:.1%}-{hi:.1%}] | {statistics.median(walls):.2f} | {mean:.2f} | "
            f"{(f'{mean / base:.2f}x' if base else '')} | "
            f"{statistics.mean(r['model_s'] for r in arm_rows):.2f} | {read:.0f} | "
            f"{statistics.mean(r['calls'] for r in arm_rows):.2f} | {'' if same is None else f'{same} of {n}'} |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--limit", type=int, default=None, help="N cases, spread over the evalset")
    parser.add_argument("--from-rows", metavar="FILE", help="re-print the table from a rows file; no model is called")
    args = parser.parse_args(argv)
    if args.from_rows:
        print_table(read_rows(Path(args.from_rows)))
        return 0
    arms = [a for a in args.arms.split(",") if a]
    for arm in arms:
        if arm not in ARMS:
            parser.error(f"unknown arm {arm!r}; known: {', '.join(ARMS)}")
    cases = real_models.spread(real_models.load_task(TASK).cases, args.limit)
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="lookahead-") as tmp:
        packs = write_packs(Path(tmp))
        for arm in arms:
            variant, depth = ARMS[arm]
            rows += run_arm(arm, packs[variant], depth, cases, Path(tmp))
            write_rows(RESULTS, rows)
    print(f"{TASK}: {len(cases)} cases, {time.perf_counter() - started:.0f} s; rows in {RESULTS}")
    print_table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
