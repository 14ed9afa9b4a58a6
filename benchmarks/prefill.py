"""What does `prefill=true` save on a CPU llama-server, and does it change answers?

The first model node of each of benchmarks/real_models.py's three packs, on every case of
its evalset, SmolLM2-135M-Instruct on llama-server (-np 2, 2 threads), through the
runtime's own backend with `grammar=gbnf` and `prefill=false` / `prefill=true`. One
server for both, a case's prompt read once before either is timed (so both find it in
the cache), the order of the two flipped from case to case:

  greedy   one call at temperature 0 each way: whether the answers are the same text,
           tokens decoded, seconds
  draws    three draws each way at the node's temperature (quorum draws; routing's
           nodes are greedy and take one): seconds a draw, tokens decoded, and how many
           cases had three draws that agree (the agreement is sampled: read it as
           "not worse", not as a gain)

Prefill writes `{"` and the first property's name ahead of the model (docs/endpoints.md,
"Prefill"): llama-server reads it with the prompt in one batch instead of decoding it a
token at a time. The warming call leaves the opening in the cache too (it decoded it),
so a prefilled call here finds it there, as a quorum's later draws do; a node's first
call reads those few tokens with its prompt. Rows: benchmarks/results/prefill.jsonl.

    .venv/bin/python benchmarks/prefill.py [--tasks a,b] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._rows import write_rows
from runtime import load_pack, open_backend
from runtime.backends import Backend, ModelCall
from runtime.messages import build_messages
from runtime.pack.fields import compare_key, rule_for
from runtime.pack.model import Node

PACKS = Path(__file__).resolve().parent / "packs"
RESULTS = Path(__file__).resolve().parent / "results" / "prefill.jsonl"
TASKS = ("helpdesk_routing", "review_aspects", "shipping_details")
WAYS = ("false", "true")


@dataclass
class Case:
    """One case's request to a task's first model node, sent either way and timed."""

    task: str
    node: Node
    case_id: str
    messages: list[dict[str, str]]

    def timed(self, backend: Backend, kind: str, way: str, n: int, temperature: float) -> dict[str, Any]:
        run_id = f"{self.task}-{self.case_id}-{kind}-{way}-{n}"
        node = self.node
        reply = backend.complete(
            ModelCall(run_id, node.id, 1, self.messages, node.schema, node.max_tokens, temperature)
        )
        return {
            "task": self.task,
            "case": self.case_id,
            "kind": kind,
            "way": way,
            "draw": n,
            "text": reply.text,
            "completion_tokens": reply.completion_tokens,
            "prompt_tokens": reply.prompt_tokens,
            "cached_tokens": reply.cached_tokens or 0,
            "seconds": reply.latency_s,
        }


def run_task(name: str, backends: dict[str, Backend], limit: int | None) -> list[dict[str, Any]]:
    pack = load_pack(PACKS / name)
    node = next(n for n in pack.nodes.values() if n.kind == "generate")
    rows: list[dict[str, Any]] = []
    for i, case in enumerate(pack.cases[:limit] if limit else pack.cases):
        ask = Case(name, node, case.id, build_messages(pack, node, {}, case.input).messages)
        ask.timed(backends["false"], "warm", "false", 0, 0.0)  # the case's prompt, into the cache
        order = WAYS if i % 2 == 0 else WAYS[::-1]
        rows.extend(ask.timed(backends[way], "greedy", way, 0, 0.0) for way in order)
        if node.samples > 1:
            rows.extend(ask.timed(backends[w], "draw", w, n, node.temperature) for w in order for n in range(1, 4))
    return rows


def unanimous(pack_name: str, rows: list[dict[str, Any]], way: str) -> tuple[int, int]:
    """Cases whose three draws agree on the node's agree_on fields (by the pack's compare rules)."""
    pack = load_pack(PACKS / pack_name)
    node = next(n for n in pack.nodes.values() if n.kind == "generate")
    fields = list(node.agree_on or node.writes)
    by_case: dict[str, list[Any]] = {}
    for r in rows:
        if r["kind"] == "draw" and r["way"] == way:
            try:
                answer = json.loads(r["text"])
                key = tuple(compare_key(rule_for(pack.fields, f), answer.get(f)) for f in fields)
            except (ValueError, AttributeError, TypeError):
                key = ("unparsed", r["draw"])
            by_case.setdefault(r["case"], []).append(key)
    return sum(len(set(keys)) == 1 for keys in by_case.values()), len(by_case)


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"\n{'task':<18} {'calls':<7} {'way':<8} {'n':>4} {'decoded':>8} {'s/call':>7} {'x plain':>8}  same/agree")
    for task in dict.fromkeys(r["task"] for r in rows):
        for kind in ("greedy", "draw"):
            cells = {w: [r for r in rows if r["task"] == task and r["kind"] == kind and r["way"] == w] for w in WAYS}
            if not cells["false"]:
                continue
            plain_s = statistics.fmean(r["seconds"] for r in cells["false"])
            if kind == "greedy":
                texts = {r["case"]: r["text"] for r in cells["false"]}
                same = sum(texts.get(r["case"]) == r["text"] for r in cells["true"])
                note = f"same answer {same} of {len(cells['true'])}"
            for way in WAYS:
                cell = cells[way]
                secs = statistics.fmean(r["seconds"] for r in cell)
                decoded = statistics.fmean(r["completion_tokens"] for r in cell)
                if kind == "draw":
                    agree, total = unanimous(task, cell, way)
                    note = f"3 agree {agree} of {total}"
                print(
                    f"{task:<18} {kind:<7} {way:<8} {len(cell):4d} {decoded:8.1f} {secs:7.3f} "
                    f"{secs / plain_s:7.2f}x  {note if way == 'true' or kind == 'draw' else ''}"
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--limit", type=int, default=None, help="the first N cases of each task")
    args = parser.parse_args(argv)
    from tests.support import model_servers

    started = time.monotonic()
    server = model_servers.start_smollm2_server(Path(tempfile.mkdtemp(prefix="prefill-")))
    spec = f"openai:{server.base_url}#smollm2;grammar=gbnf;concurrency=2;prefill="
    backends = {way: open_backend(spec + way) for way in WAYS}
    rows: list[dict[str, Any]] = []
    try:
        for task in (t for t in args.tasks.split(",") if t):
            rows.extend(run_task(task, backends, args.limit))
    finally:
        for backend in backends.values():
            backend.close()
        server.stop()
    print_table(rows)
    write_rows(RESULTS, rows)
    print(
        f"\n{time.monotonic() - started:.0f}s; raw rows in {RESULTS.relative_to(Path(__file__).resolve().parent.parent)}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
