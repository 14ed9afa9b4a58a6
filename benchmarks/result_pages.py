"""Result pages at 10,000 case runs: server time of every result page of an eval, in
process through Django's test Client (middleware, session auth, templates; no network);
and the runs list (/runs/ and GET /api/runs) at --list-runs try-it and served runs.

Setup, in a temp folder: a fresh SQLite database (migrated), a git root, one user, the
support_triage example project, and two evals of --runs finished case rows each, cycled
from the example pack's real report (tests/support/eval_results.py `fill_eval`): the
first with its traces, the second without (the other side of "compare").

Per page, --requests requests after one cold one (cache cleared): the cold time, p50 and
p95 (nearest rank) of the warm ones, and the queries per request. The test
tests/studio/evals/test_results_scale.py asserts the query counts on the same rows; the
times live here, because a busy machine is not a regression. Raw rows (one per request):
benchmarks/results/result_pages.jsonl.

    .venv/bin/python benchmarks/result_pages.py [--runs 10000] [--requests 5] [--rows FILE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._rows import write_rows  # noqa: E402
from benchmarks._studio import configure  # noqa: E402
from runtime.stats import percentile  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "result_pages.jsonl"
PAGES = {
    "summary": "summary",
    "blame": "blame",
    "coverage": "coverage",
    "tiers": "tiers",
    "cost": "cost?sort=latency&dir=desc",
    "cost table (htmx)": "cost?sort=tokens&dir=asc&page=40",
    "case": "cases/case-00004/0",
}


def fill_runs(project: Any, user: Any, count: int) -> str:
    """`count` runs, half try-it, half served (one in 50 waiting at `approve`), one a
    second apart; returns the cursor of the list's second page."""
    from datetime import UTC, datetime, timedelta

    from studio.deployments.models import Deployment, ServedRun
    from studio.runlist.query import RunQuery, run_page
    from studio.runs.models import TryRun

    deployment = Deployment.objects.create(project=project, name="triage-prod", version="v", created_by=user)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    half = count // 2
    TryRun.objects.bulk_create(
        [
            TryRun(
                project=project,
                version="v",
                input={"ticket": f"ticket {i}"},
                status="done",
                created_by=user,
                created_at=start + timedelta(seconds=2 * i),
            )
            for i in range(half)
        ],
        batch_size=5_000,
    )
    ServedRun.objects.bulk_create(
        [
            ServedRun(
                deployment=deployment,
                run_id=f"r{i}",
                input={"ticket": f"served {i}"},
                input_digest="d",
                version="v",
                status="waiting" if i % 50 == 0 else "done",
                waiting_at="approve" if i % 50 == 0 else "",
                created_at=start + timedelta(seconds=2 * i + 1),
            )
            for i in range(count - half)
        ],
        batch_size=5_000,
    )
    first = run_page(user, RunQuery())
    assert first.next is not None
    return first.next.encode()


def run(runs: int, requests: int, rows: list[dict[str, Any]], list_runs: int = 100_000) -> list[dict[str, Any]]:
    from django.contrib.auth.models import User
    from django.core.cache import cache
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from studio.evals.models import Eval
    from studio.evals.results.nodes import node_stats
    from studio.projects.models import create_project
    from studio.projects.views import example_files
    from tests.support.eval_results import fill_eval, make_eval

    user = User.objects.create_user("bench", "bench@example.com", "unused-password-for-bench")
    project = create_project(
        slug="triage", name="Support triage", owner=user, pack_files=example_files("support_triage"), message="Create"
    )
    ev = make_eval(project, user, ago_s=60)
    fill_eval(ev, runs, traces=True)
    other = make_eval(project, user)
    fill_eval(other, runs, traces=False)
    client = Client()
    client.force_login(user)
    urls = {name: f"/p/{project.slug}/evals/{ev.pk}/{page}" for name, page in PAGES.items()}
    urls["compare"] = f"/p/{project.slug}/evals/compare?a={ev.pk}&b={other.pk}"
    urls["history"] = f"/p/{project.slug}/evals/history"
    if list_runs:
        cursor = fill_runs(project, user, list_runs)
        urls["runs list"] = "/runs/"
        urls["runs list, page 2"] = f"/runs/?cursor={quote(cursor)}"
        urls["runs, waiting served"] = "/runs/?kind=served&status=waiting&node=approve"
        urls["runs, text search"] = "/runs/?q=served%2099999"
        urls["runs list (API)"] = "/api/runs?limit=50"

    def timed(name: str, url: str, cold: bool) -> None:
        headers = {"HX-Request": "true", "HX-Target": "cost-table"} if "htmx" in name else {}
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            response = client.get(url, headers=headers)
            seconds = time.perf_counter() - started
        assert response.status_code == 200, (url, response.status_code)
        rows.append({"page": name, "cold": cold, "ms": round(1000 * seconds, 3), "queries": len(queries)})

    client.get(urls["case"])  # load the pack once (kept per version), as a running studio has
    for name, url in urls.items():
        cache.clear()
        timed(name, url, cold=True)
        for _ in range(requests):
            timed(name, url, cold=False)
    # As the backend leaves a done eval: its per-node totals stored in the summary.
    Eval.objects.filter(pk=ev.pk).update(summary={"node_stats": node_stats(ev)})
    cache.clear()
    timed("blame (stored totals)", urls["blame"], cold=True)

    summary = []
    for name in dict.fromkeys(r["page"] for r in rows):
        cold = [r["ms"] for r in rows if r["page"] == name and r["cold"]]
        warm = [r["ms"] for r in rows if r["page"] == name and not r["cold"]]
        summary.append(
            {
                "page": name,
                "cold_ms": cold[0],
                "p50_ms": percentile(warm, 50) if warm else None,
                "p95_ms": percentile(warm, 95) if warm else None,
                "queries": max(r["queries"] for r in rows if r["page"] == name),
            }
        )
    return summary


def table(summary: list[dict[str, Any]]) -> str:
    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    lines = [f"{'page':<24} {'cold ms':>9} {'p50 ms':>9} {'p95 ms':>9} {'queries':>8}"]
    for s in summary:
        lines.append(
            f"{s['page']:<24} {ms(s['cold_ms']):>9} {ms(s['p50_ms']):>9} {ms(s['p95_ms']):>9} {s['queries']:>8}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000, help="case rows per eval (default 10000)")
    parser.add_argument("--list-runs", type=int, default=100_000, help="runs behind the runs list (default 100000)")
    parser.add_argument("--requests", type=int, default=5, help="warm requests per page (default 5)")
    parser.add_argument("--rows", type=Path, default=RESULTS, help="where to write the per-request rows (jsonl)")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="packforge-bench-"))
    rows: list[dict[str, Any]] = []
    load_before = os.getloadavg()[0]
    try:
        configure(tmp)
        summary = run(args.runs, args.requests, rows, args.list_runs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    write_rows(args.rows, rows)
    print(
        f"Result pages at {args.runs} runs per eval, the runs list at {args.list_runs} runs: "
        f"Django test Client in-process, SQLite, {args.requests} warm"
    )
    print(table(summary))
    print(f"\nload average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} CPUs")
    print(f"rows: {args.rows} ({len(rows)} rows)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
