"""Compounding errors: what verification buys on a long chain of model calls.

An N-node chain (benchmarks/_chain.py) where node i must answer v{i} = v{i-1} + c_i and
carries `assert: "v{i} == v{i-1} + c_i"`. The model is the seeded simulator
`sim:error=P,seed=S,invalid=0,base=fakes/scripted.json`: it answers correctly except
with probability P per call, decided by a hash of (S, run_id, node, attempt). Every
wrong answer is well-formed JSON with a wrong number (invalid=0): the schema cannot
catch it, only the node's check can, and the unverified arm walks every node.

Arms, all on the same seeds (run_id = "seed-k", S = the cell seed), so every arm sees
the same first attempt at every node (the pairing):
  verified    the default ladder (resamples 2 + feedback 1: at most 4 attempts a node)
  unverified  RunOptions(verify=False): the first answer is committed unchecked; a
              non-JSON answer still fails the run (visibly)
  budget      verified, with the run-wide budget  retry: {budget: B, max_attempts: 8},
              B = round(BUDGET_FRACTION * N)

A run is *correct* when it ends `done` and its output (every v_i) equals the correct
chain. The scripted model answers each node from the script, not from the prompt, so a
wrong v_i is not propagated into v_{i+1} as it would be in a real chain; comparing the
whole chain stands in for "the final value is right". *Silently wrong* = status done
but the output differs.

Generation ratio = total generations of an arm / total generations of the unverified
arm over the same seeds (the unverified arm makes exactly N per run). The per-step
ratio (generations per generate step walked) is printed too; it differs from the total
ratio only when a verified run stops early on an exhausted ladder.

    .venv/bin/python benchmarks/compounding.py [--seeds N] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._chain import X, write_chain
from benchmarks._rows import write_rows
from runtime import MemoryStore, RunOptions, load_pack, open_backend, run_pack

NODES = (20, 50)
ERRORS = (0.02, 0.10, 0.30)
SEEDS = 200
QUICK_SEEDS = 40
BUDGET_FRACTION = 0.8  # B = round(0.8 * N) run-wide retries
MAX_ATTEMPTS = 8
RESULTS = Path(__file__).resolve().parent / "results" / "compounding.jsonl"

# Reference figures for the verified arm (success %), from the brief.
VERIFIED_REFERENCE = {(20, 0.02): 100.0, (20, 0.10): 99.0, (50, 0.02): 100.0, (50, 0.10): 96.5, (50, 0.30): 40.0}
# Budget-arm goals: (min success %, max generation ratio vs unverified).
BUDGET_GOALS = {(50, 0.10): (99.5, 1.15), (50, 0.30): (90.0, 1.6)}


def cell_seed(nodes: int, error: float) -> int:
    """The simulator seed of a cell: fixed, distinct per cell."""
    return nodes * 1000 + round(error * 1000)


def label(nodes: int, error: float) -> str:
    return f"{nodes}n/{error * 100:g}%"


def run_cell(
    packs: dict[str, Any], correct: dict[str, int], nodes: int, error: float, seeds: int, rows: list[dict[str, Any]]
) -> dict[str, Any]:
    seed = cell_seed(nodes, error)
    arms = {
        "verified": (packs["ladder"], RunOptions()),
        "unverified": (packs["ladder"], RunOptions(verify=False)),
        "budget": (packs["budget"], RunOptions()),
    }
    backends = {}
    for arm, (pack, _) in arms.items():
        base = (pack.root / "fakes" / "scripted.json").resolve()
        backends[arm] = open_backend(f"sim:error={error},seed={seed},invalid=0,base={base}", base_dir=pack.root)
    stats = {arm: {"correct": 0, "done": 0, "silent_wrong": 0, "generations": 0, "steps": 0} for arm in arms}
    stores = {arm: MemoryStore() for arm in arms}
    mismatches = 0
    for k in range(seeds):
        first: dict[str, dict[str, str]] = {}
        for arm, (pack, options) in arms.items():
            result = run_pack(
                pack, {"x": X}, backend=backends[arm], store=stores[arm], run_id=f"seed-{k}", options=options
            )
            ok = result.status == "done" and result.output == correct
            gens = result.trace.generations
            steps = sum(1 for st in result.trace.steps if st.kind == "generate")
            s = stats[arm]
            s["correct"] += ok
            s["done"] += result.status == "done"
            s["silent_wrong"] += result.status == "done" and not ok
            s["generations"] += gens
            s["steps"] += steps
            first[arm] = {a.node: a.text for a in result.trace.attempts if a.attempt == 1 and a.stage != "reasoning"}
            rows.append(
                {
                    "cell": label(nodes, error),
                    "nodes": nodes,
                    "error_rate": error,
                    "arm": arm,
                    "seed": k,
                    "sim_seed": seed,
                    "run_id": f"seed-{k}",
                    "status": result.status,
                    "generations": gens,
                    "steps": steps,
                    "correct": ok,
                }
            )
        # The pairing: at every node two arms both reached, the first answer is the same.
        for arm in ("unverified", "budget"):
            mismatches += sum(
                1 for node, text in first[arm].items() if node in first["verified"] and first["verified"][node] != text
            )
    for backend in backends.values():
        backend.close()
    unv = stats["unverified"]

    def ratio(arm: str) -> float:
        return round(stats[arm]["generations"] / unv["generations"], 3) if unv["generations"] else float("nan")

    def per_step(arm: str) -> float:
        a = stats[arm]
        if not (a["steps"] and unv["steps"] and unv["generations"]):
            return float("nan")
        return round((a["generations"] / a["steps"]) / (unv["generations"] / unv["steps"]), 3)

    def pct(arm: str) -> float:
        return round(100.0 * stats[arm]["correct"] / seeds, 1)

    cell: dict[str, Any] = {
        "nodes": nodes,
        "error_rate": error,
        "verified_success": pct("verified"),
        "unverified_success": pct("unverified"),
        "generations_ratio": ratio("verified"),
        "silent_wrong": stats["verified"]["silent_wrong"],  # the verified arm's: the one that must be 0
        "silent_wrong_by_arm": {arm: stats[arm]["silent_wrong"] for arm in arms},
        "budget_success": pct("budget"),
        "budget_generations_ratio": ratio("budget"),
        "budget_silent_wrong": stats["budget"]["silent_wrong"],
        "verified_silent_wrong": stats["verified"]["silent_wrong"],
        "unverified_silent_wrong": stats["unverified"]["silent_wrong"],
        "analytical": round(100.0 * (1 - error) ** nodes, 1),
        "analytical_verified": round(100.0 * (1 - error**4) ** nodes, 1),
        "generations_ratio_per_step": per_step("verified"),
        "budget_generations_ratio_per_step": per_step("budget"),
        "budget": round(BUDGET_FRACTION * nodes),
        "seeds": seeds,
        "sim_seed": seed,
        "generations": {arm: stats[arm]["generations"] for arm in arms},
        "pairing_mismatches": mismatches,
    }
    cell["goals"] = goals(cell)
    cell["goal_met"] = all(g["met"] for g in cell["goals"])
    return cell


def goals(cell: dict[str, Any]) -> list[dict[str, Any]]:
    key = (cell["nodes"], cell["error_rate"])
    out: list[dict[str, Any]] = []
    ref = VERIFIED_REFERENCE.get(key)
    if ref is not None:
        out.append(
            {"goal": f"verified >= {ref}", "value": cell["verified_success"], "met": cell["verified_success"] >= ref}
        )
    out.append(
        {
            "goal": "paired first attempts identical",
            "value": cell["pairing_mismatches"],
            "met": cell["pairing_mismatches"] == 0,
        }
    )
    out.append({"goal": "verified silent wrong == 0", "value": cell["silent_wrong"], "met": cell["silent_wrong"] == 0})
    if key in BUDGET_GOALS:
        min_success, max_ratio = BUDGET_GOALS[key]
        out.append(
            {
                "goal": f"budget >= {min_success}",
                "value": cell["budget_success"],
                "met": cell["budget_success"] >= min_success,
            }
        )
        out.append(
            {
                "goal": f"budget gen ratio <= {max_ratio}",
                "value": cell["budget_generations_ratio"],
                "met": cell["budget_generations_ratio"] <= max_ratio,
                "per_step_value": cell["budget_generations_ratio_per_step"],
                "per_step_met": cell["budget_generations_ratio_per_step"] <= max_ratio,
            }
        )
    return out


def table(cells: list[dict[str, Any]]) -> str:
    head = (
        "cell",
        "verified%",
        "unverif%",
        "budget%",
        "(1-p)^N%",
        "gen ver/unv",
        "gen bud/unv",
        "per-step v/b",
        "silent v/u/b",
        "goal met",
    )
    lines = []
    for c in cells:
        sw = c["silent_wrong_by_arm"]
        missed = [g for g in c["goals"] if not g["met"]]
        met = (
            "yes"
            if not missed
            else "NO: "
            + "; ".join(
                f"{g['goal']} (got {g['value']}"
                + (
                    f"; per step {g['per_step_value']}: {'ok' if g['per_step_met'] else 'also over'}"
                    if "per_step_value" in g
                    else ""
                )
                + ")"
                for g in missed
            )
        )
        lines.append(
            (
                label(c["nodes"], c["error_rate"]),
                f"{c['verified_success']:.1f}",
                f"{c['unverified_success']:.1f}",
                f"{c['budget_success']:.1f}",
                f"{c['analytical']:.1f}",
                f"{c['generations_ratio']:.3f}",
                f"{c['budget_generations_ratio']:.3f}",
                f"{c['generations_ratio_per_step']:.3f}/{c['budget_generations_ratio_per_step']:.3f}",
                f"{sw['verified']}/{sw['unverified']}/{sw['budget']}",
                met,
            )
        )
    widths = [max(len(str(r[i])) for r in [head, *lines]) for i in range(len(head))]
    fmt = "  ".join(f"{{:<{w}}}" if i in (0, len(head) - 1) else f"{{:>{w}}}" for i, w in enumerate(widths))
    out = [fmt.format(*head), fmt.format(*("-" * w for w in widths))]
    out += [fmt.format(*r) for r in lines]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=None, help=f"runs per cell and arm (default {SEEDS})")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_SEEDS} seeds per cell (unless --seeds)")
    parser.add_argument("--json", action="store_true", help="print the cells as JSON instead of a table")
    parser.add_argument("--rows", type=Path, default=RESULTS, help="where to write the per-run rows (jsonl)")
    args = parser.parse_args(argv)
    seeds = args.seeds or (QUICK_SEEDS if args.quick else SEEDS)
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    cells: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="pf-compounding-") as tmp:
        for nodes in NODES:
            correct = write_chain(Path(tmp) / f"ladder{nodes}", nodes)
            write_chain(
                Path(tmp) / f"budget{nodes}",
                nodes,
                retry={"budget": round(BUDGET_FRACTION * nodes), "max_attempts": MAX_ATTEMPTS},
            )
            packs = {
                "ladder": load_pack(Path(tmp) / f"ladder{nodes}"),
                "budget": load_pack(Path(tmp) / f"budget{nodes}"),
            }
            for error in ERRORS:
                cells.append(run_cell(packs, correct, nodes, error, seeds, rows))
    write_rows(args.rows, rows)
    elapsed = time.perf_counter() - started
    if args.json:
        print(json.dumps(cells, indent=1))
        return 0
    print(
        f"Compounding errors: {seeds} seeds per cell and arm; budget arm B = round({BUDGET_FRACTION}*N), "
        f"max_attempts {MAX_ATTEMPTS}; ladder = 1 + 2 resamples + 1 feedback"
    )
    print(table(cells))
    print(
        "\nsuccess = done with every v_i correct; (1-p)^N = analytical unverified success; "
        "gen x/unv = total generations of arm x / unverified arm (same seeds);\n"
        "per-step v/b = generations per generate step walked, verified/budget arm over unverified;\n"
        "silent v/u/b = runs that ended done with a wrong output, verified/unverified/budget."
    )
    for c in cells:
        for g in c["goals"]:
            if "per_step_value" in g and not g["met"]:
                print(
                    f"note {label(c['nodes'], c['error_rate'])}: '{g['goal']}' missed on total generations "
                    f"({g['value']}); per generate step the ratio is {g['per_step_value']} "
                    f"({'within' if g['per_step_met'] else 'also over'} the goal)"
                )
    print(f"\nrows: {args.rows} ({len(rows)} runs), {elapsed:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
