"""Studio server time: what a user's request costs, in-process through Django's test
Client (the whole middleware stack, session auth, templates, git reads and writes; no
network, no HTTP parsing).

Setup, in a temp folder: a fresh SQLite database (migrated), a git root, one user,
a 20-file pack (an 8-node chain from benchmarks/_chain.py: manifest, graph, 8 prompts,
8 grammars, the scripted model, an evalset) and 199 small projects beside it, so the
projects list has 200. The user is an author member of every project (not a superuser,
so the list query goes through memberships).

Measured, each over --requests requests after a short warm-up:
  save (page)      POST /p/<slug>/files/prompts/n1.txt: the editor's save (a commit,
                   the row's head, validation of the saved pack for the message), 302
  save (API)       PUT /api/projects/<slug>/files with a bearer token: one changed file,
                   the answer lists the version's changes
  diff (page)      GET /p/<slug>/diff/?a=&b=: two versions that differ in all 20 files,
                   side by side, file by file
  diff (API)       GET /api/projects/<slug>/diff?a=&b= (unified), the same two versions
  history (page)   GET /p/<slug>/history/ with 200 commits (the saves above, topped up
                   with direct saves; more with --requests over 99)
  projects list    GET / with 200 projects

Time is wall time around the client call (server time plus the test client's own small
cost); the CPU column is the process's own CPU time per request, which other load on a
shared machine does not inflate. p50 and p95 by nearest rank. Raw rows go to benchmarks/results/studio.jsonl.

    .venv/bin/python benchmarks/studio.py [--requests N] [--quick] [--json] [--rows FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._chain import write_chain  # noqa: E402
from benchmarks._studio import configure  # noqa: E402
from runtime.stats import percentile  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "studio.jsonl"
REQUESTS = 100
QUICK_REQUESTS = 20
WARMUP = 5
PROJECTS = 200
SLUG = "bench20"
HISTORY_COMMITS = 200

# p95 goals in ms, from the brief: save and diff 50 ms, pages 100 ms.
GOALS = {
    "save (page)": 50,
    "save (API)": 50,
    "diff (page)": 50,
    "diff (API)": 50,
    "history (page)": 100,
    "projects list": 100,
}


def twenty_file_pack(tmp: Path) -> dict[str, bytes]:
    root = tmp / "pack20"
    values = write_chain(root, 8, name="bench20")
    cases = [{"id": f"c{i}", "input": {"x": 7}, "expected": {"v8": values["v8"]}} for i in range(5)]
    (root / "evalset.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    files = {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    assert len(files) == 20, sorted(files)
    return files


def build(tmp: Path) -> dict[str, Any]:
    from django.contrib.auth.models import User

    from studio.accounts.models import ApiToken
    from studio.projects.models import create_project
    from studio.projects.storage import PackRepo

    user = User.objects.create_user("bench", "bench@example.com", "unused-password-for-bench")
    files = twenty_file_pack(tmp)
    project = create_project(slug=SLUG, name="Bench 20", owner=user, pack_files=files, message="Create")
    repo = PackRepo(project.repo_path)
    first = repo.head()
    # The second version of the diff: every one of the 20 files changed.
    changed = {f"pack/{p}": d + (b"\n" if p.endswith(".jsonl") else b"\n\n") for p, d in files.items()}
    changed["pack/prompts/n3.txt"] = b"Add the constant to {{ v2 }}.\nThink step by step.\nReply with v3.\n"
    second = repo.save(changed, base=first, author="bench", email="", message="Touch every file")
    small = {"manifest.yaml": b"name: p\nversion: '1'\nentry: a\n"}
    for i in range(PROJECTS - 1):
        create_project(slug=f"p{i:03d}", name=f"Project {i}", owner=user, pack_files=small, message="Create")
    _, token = ApiToken.issue(user, "bench")
    return {"user": user, "token": token, "a": first, "b": second, "repo": repo}


def measure(name: str, n: int, call: Callable[[int], Any], expect: int, rows: list[dict[str, Any]]) -> list[float]:
    times = []
    for i in range(-WARMUP, n):
        cpu = time.process_time()
        start = time.perf_counter()
        response = call(i)
        ms = (time.perf_counter() - start) * 1000
        cpu_ms = (time.process_time() - cpu) * 1000
        if response.status_code != expect:
            raise SystemExit(
                f"{name}: request {i} answered {response.status_code}, expected {expect}:\n"
                f"{response.content[:2000].decode(errors='replace')}"
            )
        if i >= 0:
            times.append(ms)
            rows.append(
                {
                    "bench": "studio",
                    "op": name,
                    "request": i,
                    "ms": round(ms, 3),
                    "cpu_ms": round(cpu_ms, 3),
                    "status": response.status_code,
                }
            )
    return times


def run(n: int, rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from django.test import Client

    state = build(Path(os.environ["PACKFORGE_VAR"]).parent)
    repo, token = state["repo"], state["token"]
    client = Client()
    client.force_login(state["user"])
    api = Client(headers={"Authorization": f"Bearer {token}"})
    results: dict[str, list[float]] = {}

    def save_page(i: int) -> Any:
        return client.post(
            f"/p/{SLUG}/files/prompts/n1.txt",
            {
                "content": f"Add 12 to {{{{ input.x }}}}. Reply with v1. (edit {i})\n",
                "base": repo.head(),
                "message": f"Edit n1's prompt ({i})",
            },
        )

    def save_api(i: int) -> Any:
        body = {
            "base": repo.head(),
            "message": f"Edit n2's prompt ({i})",
            "files": {"prompts/n2.txt": f"Add 3 to {{{{ v1 }}}}. Reply with v2. (edit {i})\n"},
        }
        return api.put(f"/api/projects/{SLUG}/files", body, content_type="application/json")

    a, b = state["a"], state["b"]
    results["save (page)"] = measure("save (page)", n, save_page, 302, rows)
    results["save (API)"] = measure("save (API)", n, save_api, 200, rows)
    results["diff (page)"] = measure(
        "diff (page)", n, lambda i: client.get(f"/p/{SLUG}/diff/", {"a": a, "b": b}), 200, rows
    )
    results["diff (API)"] = measure(
        "diff (API)", n, lambda i: api.get(f"/api/projects/{SLUG}/diff", {"a": a, "b": b}), 200, rows
    )
    # The history page at a fixed length, whatever --requests made: top up with direct saves.
    while (commits := len(repo.log(limit=10_000))) < HISTORY_COMMITS:
        repo.save(
            {"pack/prompts/n4.txt": f"Add 5 to {{{{ v3 }}}}. Reply with v4. ({commits})\n".encode()},
            base=repo.head(),
            author="bench",
            email="",
            message=f"Edit n4's prompt ({commits})",
        )
    results["history (page)"] = measure("history (page)", n, lambda i: client.get(f"/p/{SLUG}/history/"), 200, rows)
    results["projects list"] = measure("projects list", n, lambda i: client.get("/"), 200, rows)

    from studio.projects.models import Project

    notes = {
        "history (page)": f"{commits} commits",
        "projects list": f"{Project.objects.count()} projects",
        "diff (page)": "20 of 20 files changed",
        "diff (API)": "20 of 20 files changed",
        "save (page)": "1 file, 20-file pack",
        "save (API)": "1 file, 20-file pack",
    }
    summary = []
    for name, times in results.items():
        p95 = percentile(times, 95)
        cpu = [r["cpu_ms"] for r in rows if r["op"] == name]
        summary.append(
            {
                "op": name,
                "requests": len(times),
                "p50_ms": round(percentile(times, 50), 2),
                "p95_ms": round(p95, 2),
                "cpu_p95_ms": round(percentile(cpu, 95), 2),
                "goal_p95_ms": GOALS[name],
                "meets_goal": p95 < GOALS[name],
                "note": notes[name],
            }
        )
    return summary, {"commits": commits}


def table(summary: list[dict[str, Any]]) -> str:
    lines = [
        "| request | what | p50 ms | p95 ms | CPU p95 ms | goal (p95) | meets |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for s in summary:
        lines.append(
            f"| {s['op']} | {s['note']} | {s['p50_ms']:.1f} | {s['p95_ms']:.1f} | {s['cpu_p95_ms']:.1f} | "
            f"< {s['goal_p95_ms']} ms | {'yes' if s['meets_goal'] else 'NO'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=None, help=f"requests per measure (default {REQUESTS})")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_REQUESTS} requests per measure")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON instead of a table")
    parser.add_argument("--rows", type=Path, default=RESULTS, help="where to write the per-request rows (jsonl)")
    args = parser.parse_args(argv)
    n = args.requests or (QUICK_REQUESTS if args.quick else REQUESTS)
    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="packforge-bench-"))
    rows: list[dict[str, Any]] = []
    try:
        configure(tmp)
        summary, _ = run(n, rows)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    args.rows.parent.mkdir(parents=True, exist_ok=True)
    args.rows.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elapsed = time.perf_counter() - started
    load = f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} CPUs"
    if args.json:
        print(json.dumps({"requests": n, "load": load, "summary": summary}, indent=1))
        return 0
    print(
        f"Studio server time: Django test Client in-process, SQLite + git on local disk, "
        f"{n} requests per row after {WARMUP} warm-up"
    )
    print(table(summary))
    print(
        f"\nwall time decides the goal; CPU is this process's own time per request, which other load on the "
        f"machine does not inflate ({load})."
    )
    print(f"rows: {args.rows} ({len(rows)} rows), {elapsed:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
