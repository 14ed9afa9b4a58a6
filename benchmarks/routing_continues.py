"""The routing pack with `continues:` (docs/pack-format.md), on the real-model benchmark.

The benchmark pack (benchmarks/packs/helpdesk_routing) asks two conversations: the
department node, then the sub-issue node with its own system prompt and nearest
examples. This writes the variant measured against it into a temporary folder and runs
benchmarks/real_models.py on it:

- one system prompt holding both label lists (the one-call arm's,
  benchmarks/one_call/helpdesk_routing.system.txt) as the pack's `system:`, no
  per-node system prompts;
- the sub-issue node `continues: department`, without examples of its own; its prompt
  "Sub-issue of this {{ department }} message?"; the department's three nearest
  examples show both labels (runtime.messages.answer_fields).

Everything else (cases, examples, gates, arms, a fresh llama-server per arm) is
real_models.py's. Rows: benchmarks/results/real_models_continues.jsonl (re-print them
with `real_models.py --from-rows`).

    .venv/bin/python benchmarks/routing_continues.py [--arms pack,written,one_call,baseline]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import real_models

TASK = "helpdesk_routing"
ROWS = real_models.HERE / "results" / "real_models_continues.jsonl"


def write_variant(folder: Path) -> Path:
    """The routing pack with the sub-issue node continuing the department's conversation."""
    root = folder / TASK
    shutil.copytree(real_models.PACKS / TASK, root)
    (root / "system.txt").write_text((real_models.ONE_CALL / f"{TASK}.system.txt").read_text())
    graph = yaml.safe_load((root / "graph.yaml").read_text())
    department, subissue = graph["nodes"]["department"], graph["nodes"]["subissue"]
    for node in (department, subissue):
        (root / node.pop("system")).unlink()
    del subissue["examples"]
    subissue["continues"] = "department"
    (root / "graph.yaml").write_text(yaml.safe_dump(graph, sort_keys=False))
    (root / "prompts" / "subissue.txt").write_text("Sub-issue of this {{ department }} message?\n")
    return root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arms", default="pack,written,one_call,baseline")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="routing-continues-") as tmp:
        write_variant(Path(tmp))
        real_models.PACKS, real_models.RESULTS = Path(tmp), ROWS
        return real_models.main(["--tasks", TASK, "--arms", args.arms])


if __name__ == "__main__":
    raise SystemExit(main())
