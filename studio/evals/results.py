"""The numbers behind an eval's result pages, aggregated over its EvalCase rows.

Definitions are runtime/evaluate.py's (docs/eval-report.md), so the studio and
`packforge eval --json` say the same thing about the same runs:

- A case run is *scored* once it has an outcome: passed, failed, or error (a run that
  could not be brought to an outcome counts as a failure). Queued, running and
  cancelled runs are counted, but are in no rate.
- pass_rate = passed / scored, with a Wilson 95% interval; escalation_rate = tier
  "escalated" / scored; schema_violation_rate = parse + schema + truncated rejections /
  generations; mean_model_calls and cost_per_case are sums over scored runs / scored.
- A scored run without a tier (an error row) is in the `failed` tier, as the runtime
  puts every run that did not finish there.
- Per-node attempts, rejections, tokens, latency and cost come from the traces'
  attempts (runtime EvalReport.per_node); tool calls are counted beside them.
- An edge's count is the number of runs that took it at least once (EvalReport.coverage).

Everything is aggregated in the database: counts and sums with aggregate/annotate,
trace attempts and edge lists with the database's JSON array functions (json_each on
SQLite, jsonb_array_elements on Postgres). No page loads 10,000 traces into Python.
Per-node totals still make the database read every trace, so they are kept once an
eval's scored rows stop changing (in Eval.summary["node_stats"] when the backend stores
them there at the end of an eval, else in Django's cache under a key that changes with
the rows)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import Count, F, IntegerField, Max, Q, QuerySet, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

from runtime import (
    DEFAULT_TOLERANCES,
    METRIC_DIRECTIONS,
    PATH_PROBLEM_KINDS,
    SCHEMA_CATEGORIES,
    CaseProblem,
    Edge,
    Pack,
    check_baseline,
    mcnemar_exact,
    paired_outcomes,
    percentile,
    wilson_interval,
)
from studio.evals.models import Eval, EvalCase

__all__ = [
    "SCORED",
    "NotComparable",
    "baseline_for",
    "compare",
    "cost_summary",
    "cost_table",
    "coverage",
    "edge_name",
    "gate",
    "history",
    "metrics_of",
    "node_blame",
    "node_stats",
    "summarize",
    "tiers",
]

Status = EvalCase.Status
SCORED = (Status.PASSED, Status.FAILED, Status.ERROR)
TIERS = ("auto", "escalated", "failed")
# The SQL below reads the runtime's trace dict (Trace.to_dict) at this version: its
# "attempts" list and their node, ok, category, reason, tokens, latency_s and cost_usd.
READS_TRACE_VERSION = 1  # runtime.TRACE_VERSION when this SQL was written
NODE_STATS_VERSION = 1


def scored(ev: Eval) -> QuerySet[EvalCase]:
    return EvalCase.objects.filter(eval=ev, status__in=SCORED)


def edge_name(e: Edge) -> str:
    """An edge in words, as runtime.evaluate names it in reports: `a -> b [when]` / `a -> b (on_fail)`."""
    kind = f" ({e.kind})" if e.kind != "next" else (f" [{e.when.source}]" if e.when else "")
    return f"{e.source} -> {e.target}{kind}"


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


# -- summary and the gate metrics ---------------------------------------------------------


def _totals(ev: Eval) -> dict[str, Any]:
    """One aggregate query over the scored rows."""
    rejected = {f"rej_{c}": Sum(Cast(KT(f"rejections__{c}"), IntegerField())) for c in SCHEMA_CATEGORIES}
    row = scored(ev).aggregate(
        n=Count("id"),
        passed=Count("id", filter=Q(status=Status.PASSED)),
        escalated=Count("id", filter=Q(tier="escalated")),
        generations=Sum("generations"),
        model_calls=Sum("model_calls"),
        cost=Sum("cost_usd"),
        latency=Sum("latency_s"),
        prompt_tokens=Sum("prompt_tokens"),
        completion_tokens=Sum("completion_tokens"),
        reasoning_tokens=Sum("reasoning_tokens"),
        **rejected,
    )
    out = {k: (v or 0) for k, v in row.items()}
    out["violations"] = sum(out.pop(f"rej_{c}") for c in SCHEMA_CATEGORIES)
    return out


def _metrics(t: dict[str, Any]) -> dict[str, float]:
    n = max(t["n"], 1)
    return {
        "pass_rate": t["passed"] / n,
        "escalation_rate": t["escalated"] / n,
        "schema_violation_rate": t["violations"] / t["generations"] if t["generations"] else 0.0,
        "mean_model_calls": t["model_calls"] / n,
        "cost_per_case": t["cost"] / n,
    }


def metrics_of(ev: Eval) -> dict[str, float]:
    """The numbers a baseline gate compares, as runtime EvalReport.metrics() defines them."""
    return _metrics(_totals(ev))


def _spread(values: list[float]) -> dict[str, float]:
    return {
        "mean": sum(values) / len(values) if values else 0.0,
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
    }


def summarize(ev: Eval) -> dict[str, Any]:
    """Pass rate with its interval, tier split, schema-violation rate, and per-case
    generations, tokens, cost and latency (mean, p50, p95)."""
    t = _totals(ev)
    counts = dict(EvalCase.objects.filter(eval=ev).values_list("status").annotate(n=Count("id")).order_by())
    rows = list(
        scored(ev)
        .annotate(tokens=F("prompt_tokens") + F("completion_tokens") + F("reasoning_tokens"))
        .values_list("cost_usd", "latency_s", "generations", "tokens")
    )
    columns = list(zip(*rows, strict=True)) if rows else [(), (), (), ()]
    cost, latency, generations, tokens = ([float(v) for v in col] for col in columns)
    lo, hi = wilson_interval(t["passed"], t["n"])
    return {
        "total": ev.total or sum(counts.values()),
        "rows": sum(counts.values()),
        "counts": {s.value: counts.get(s.value, 0) for s in Status},
        "scored": t["n"],
        "passed": t["passed"],
        "failed": t["n"] - t["passed"],
        "pass_rate": _ratio(t["passed"], t["n"]),
        "ci95": (lo, hi),
        "metrics": _metrics(t),
        "tiers": tiers(ev),
        "schema_violations": t["violations"],
        "generations_total": t["generations"],
        "schema_violation_rate": _metrics(t)["schema_violation_rate"],
        "generations": _spread(generations),
        "tokens": _spread(tokens),
        "cost": _spread(cost),
        "cost_total": t["cost"],
        "latency": _spread(latency),
        "model_calls_per_case": _metrics(t)["mean_model_calls"],
    }


def tiers(ev: Eval) -> dict[str, Any]:
    """Per tier: runs, share, accuracy (pass rate inside the tier), cost per case."""
    got: dict[str, dict[str, float]] = defaultdict(lambda: {"n": 0, "passed": 0, "cost": 0.0})
    for row in (
        scored(ev)
        .values("tier")
        .annotate(n=Count("id"), passed=Count("id", filter=Q(status=Status.PASSED)), cost=Sum("cost_usd"))
        .order_by()
    ):
        into = got[row["tier"] or "failed"]
        into["n"] += row["n"]
        into["passed"] += row["passed"]
        into["cost"] += row["cost"] or 0.0
    total = sum(g["n"] for g in got.values())
    names = list(TIERS) + sorted(set(got) - set(TIERS))
    rows = [
        {
            "tier": name,
            "count": int(got[name]["n"]),
            "share": _ratio(got[name]["n"], total),
            "passed": int(got[name]["passed"]),
            "accuracy": _ratio(got[name]["passed"], got[name]["n"]),
            "cost_total": got[name]["cost"],
            "cost_per_case": _ratio(got[name]["cost"], got[name]["n"]),
        }
        for name in names
    ]
    by = {r["tier"]: r for r in rows}
    return {
        "rows": rows,
        "total": total,
        "auto": by["auto"]["count"],
        "escalated": by["escalated"]["count"],
        "failed": by["failed"]["count"],
        "auto_accuracy": by["auto"]["accuracy"],
    }


# -- per node -----------------------------------------------------------------------------


def _table() -> str:
    return connection.ops.quote_name(EvalCase._meta.db_table)


_SQL_ATTEMPTS = {
    "sqlite": """
        SELECT json_extract(a.value, '$.node'), json_extract(a.value, '$.ok'),
               CASE WHEN json_extract(a.value, '$.ok') THEN NULL ELSE json_extract(a.value, '$.category') END,
               CASE WHEN json_extract(a.value, '$.ok') THEN NULL ELSE json_extract(a.value, '$.reason') END, COUNT(*),
               SUM(json_extract(a.value, '$.prompt_tokens')), SUM(json_extract(a.value, '$.completion_tokens')),
               SUM(json_extract(a.value, '$.reasoning_tokens')), SUM(json_extract(a.value, '$.latency_s')),
               SUM(json_extract(a.value, '$.cost_usd'))
        FROM {table} AS c, json_each(c.trace, '$.attempts') AS a
        WHERE c.eval_id = %s AND c.status IN (%s, %s, %s)
        GROUP BY 1, 2, 3, 4""",
    "postgresql": """
        SELECT a.value->>'node', (a.value->>'ok')::boolean,
               CASE WHEN (a.value->>'ok')::boolean THEN NULL ELSE a.value->>'category' END,
               CASE WHEN (a.value->>'ok')::boolean THEN NULL ELSE a.value->>'reason' END, COUNT(*),
               SUM((a.value->>'prompt_tokens')::bigint), SUM((a.value->>'completion_tokens')::bigint),
               SUM((a.value->>'reasoning_tokens')::bigint), SUM((a.value->>'latency_s')::float8),
               SUM((a.value->>'cost_usd')::float8)
        FROM {table} AS c CROSS JOIN LATERAL jsonb_array_elements(c.trace->'attempts') AS a(value)
        WHERE c.eval_id = %s AND c.status IN (%s, %s, %s) AND jsonb_typeof(c.trace->'attempts') = 'array'
        GROUP BY 1, 2, 3, 4""",
}
_SQL_TOOLS = {
    "sqlite": """
        SELECT json_extract(t.value, '$.node'), COUNT(*), SUM(json_extract(t.value, '$.latency_s'))
        FROM {table} AS c, json_each(c.trace, '$.tool_calls') AS t
        WHERE c.eval_id = %s AND c.status IN (%s, %s, %s)
        GROUP BY 1""",
    "postgresql": """
        SELECT t.value->>'node', COUNT(*), SUM((t.value->>'latency_s')::float8)
        FROM {table} AS c CROSS JOIN LATERAL jsonb_array_elements(c.trace->'tool_calls') AS t(value)
        WHERE c.eval_id = %s AND c.status IN (%s, %s, %s) AND jsonb_typeof(c.trace->'tool_calls') = 'array'
        GROUP BY 1""",
}


def _empty_node() -> dict[str, Any]:
    return {
        "attempts": 0,
        "rejections": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "reasoning_tokens": 0,
        "tokens": 0,
        "latency_s": 0.0,
        "cost_usd": 0.0,
        "tool_calls": 0,
        "tool_latency_s": 0.0,
        "categories": {},
        "reasons": [],
    }


def _attempt_groups(ev: Eval) -> Iterable[tuple[Any, ...]]:
    """(node, ok, category, reason, n, prompt, completion, reasoning, latency, cost) groups."""
    sql = _SQL_ATTEMPTS.get(connection.vendor)
    if sql is not None:
        with connection.cursor() as cur:
            cur.execute(sql.format(table=_table()), [ev.pk, *SCORED])
            return cur.fetchall()
    groups: dict[tuple[Any, ...], list[float]] = defaultdict(lambda: [0, 0, 0, 0, 0.0, 0.0])
    for trace in scored(ev).exclude(trace=None).values_list("trace", flat=True).iterator():
        for a in (trace or {}).get("attempts", []):
            g = groups[(a.get("node"), bool(a.get("ok")), a.get("category"), a.get("reason"))]
            for i, key in enumerate(
                ("prompt_tokens", "completion_tokens", "reasoning_tokens", "latency_s", "cost_usd"), start=1
            ):
                g[i] += a.get(key) or 0
            g[0] += 1
    return [(*k, *v) for k, v in groups.items()]


def _tool_groups(ev: Eval) -> Iterable[tuple[Any, ...]]:
    sql = _SQL_TOOLS.get(connection.vendor)
    if sql is not None:
        with connection.cursor() as cur:
            cur.execute(sql.format(table=_table()), [ev.pk, *SCORED])
            return cur.fetchall()
    groups: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for trace in scored(ev).exclude(trace=None).values_list("trace", flat=True).iterator():
        for t in (trace or {}).get("tool_calls", []):
            groups[t.get("node")][0] += 1
            groups[t.get("node")][1] += t.get("latency_s") or 0.0
    return [(k, *v) for k, v in groups.items()]


def _compute_node_stats(ev: Eval, tools: bool) -> dict[str, Any]:
    nodes: dict[str, dict[str, Any]] = defaultdict(_empty_node)
    for node, ok, category, reason, n, pt, ct, rt, lat, cost in _attempt_groups(ev):
        row = nodes[str(node)]
        row["attempts"] += n
        row["prompt_tokens"] += int(pt or 0)
        row["completion_tokens"] += int(ct or 0)
        row["reasoning_tokens"] += int(rt or 0)
        row["latency_s"] += float(lat or 0.0)
        row["cost_usd"] += float(cost or 0.0)
        if not ok:
            row["rejections"] += n
            cat = str(category or "unknown")
            row["categories"][cat] = row["categories"].get(cat, 0) + n
            row["reasons"].append([cat, str(reason or ""), n])
    for node, n, lat in _tool_groups(ev) if tools else ():
        nodes[str(node)]["tool_calls"] += n
        nodes[str(node)]["tool_latency_s"] += float(lat or 0.0)
    for row in nodes.values():
        row["tokens"] = row["prompt_tokens"] + row["completion_tokens"] + row["reasoning_tokens"]
        row["reasons"].sort(key=lambda r: (-r[2], r[0], r[1]))
    return {"version": NODE_STATS_VERSION, "tools": tools, "nodes": dict(nodes)}


def _fingerprint(ev: Eval) -> str:
    """Changes whenever a scored row is added or re-finished; cheap (one indexed aggregate)."""
    row = scored(ev).aggregate(n=Count("id"), last=Max("finished_at"), top=Max("id"))
    last = row["last"].timestamp() if row["last"] else 0
    return f"{ev.pk}:{ev.created_at.timestamp()}:{row['n']}:{row['top']}:{last}"


def node_stats(ev: Eval, *, tools: bool = True) -> dict[str, Any]:
    """Per node, over the scored runs' traces: attempts, rejections by category and by
    reason, tokens, latency and cost of its model calls; with `tools`, tool calls and
    their latency (a second pass over the traces, skipped for packs without tool nodes).

    The one costly aggregate of the result pages (the database reads every trace), so it
    is computed once per state of the rows: JSON-serialisable, the backend may store it
    as Eval.summary["node_stats"] when an eval ends (read back here once it has ended);
    otherwise it is kept in Django's cache under a key that changes with the rows."""
    stored = (ev.summary or {}).get("node_stats") if isinstance(ev.summary, dict) else None
    ended = ev.status == Eval.Status.DONE or (ev.status == Eval.Status.CANCELLED and ev.finished_at is not None)
    if (
        ended
        and isinstance(stored, dict)
        and stored.get("version") == NODE_STATS_VERSION
        and isinstance(stored.get("nodes"), dict)
        and (stored.get("tools", True) or not tools)
    ):
        return stored
    key = f"packforge:evals:node-stats:v{NODE_STATS_VERSION}:{int(tools)}:{_fingerprint(ev)}"
    found = cache.get(key)
    if found is None:
        found = _compute_node_stats(ev, tools)
        cache.set(key, found, timeout=7 * 24 * 3600)
    return found  # type: ignore[no-any-return]


def node_blame(ev: Eval, pack: Pack | None) -> dict[str, Any]:
    """Failures blamed on each node (and their share of all failures), next to the node's
    attempts, rejections with reasons, tokens, latency and cost."""
    blamed = dict(scored(ev).exclude(status=Status.PASSED).values_list("blamed").annotate(n=Count("id")).order_by())
    failures = sum(blamed.values())
    stats = node_stats(ev, tools=pack is None or any(n.kind == "tool" for n in pack.nodes.values()))["nodes"]
    order = list(pack.nodes) if pack is not None else []
    order += sorted((set(stats) | {b for b in blamed if b}) - set(order))
    rows = []
    for node in order:
        s = stats.get(node) or _empty_node()
        n = blamed.get(node, 0)
        rows.append(
            {
                "node": node,
                "kind": pack.nodes[node].kind if pack is not None and node in pack.nodes else "",
                "in_pack": pack is not None and node in pack.nodes,
                "failures": n,
                "share": _ratio(n, failures) or 0.0,
                "attempts": s["attempts"],
                "rejections": s["rejections"],
                "rejection_rate": _ratio(s["rejections"], s["attempts"]),
                "categories": dict(sorted(s["categories"].items(), key=lambda kv: -kv[1])),
                "reasons": [{"category": c, "reason": r, "count": k} for c, r, k in s["reasons"]],
                "tokens": s["tokens"],
                "prompt_tokens": s["prompt_tokens"],
                "completion_tokens": s["completion_tokens"],
                "reasoning_tokens": s["reasoning_tokens"],
                "latency_s": s["latency_s"],
                "cost_usd": s["cost_usd"],
                "tool_calls": s["tool_calls"],
                "tool_latency_s": s["tool_latency_s"],
            }
        )
    return {
        "nodes": rows,
        "failures": failures,
        "unblamed": blamed.get("", 0),
        "shares": {r["node"]: r["share"] for r in rows},
    }


# -- branch coverage ----------------------------------------------------------------------

_SQL_EDGES = {
    "sqlite": """
        SELECT e.value, COUNT(DISTINCT c.id) FROM {table} AS c, json_each(c.edges) AS e
        WHERE c.eval_id = %s AND c.status IN (%s, %s, %s) GROUP BY e.value""",
    "postgresql": """
        SELECT e.value, COUNT(DISTINCT c.id)
        FROM {table} AS c CROSS JOIN LATERAL jsonb_array_elements_text(c.edges) AS e(value)
        WHERE c.eval_id = %s AND c.status IN (%s, %s, %s) AND jsonb_typeof(c.edges) = 'array'
        GROUP BY e.value""",
}


def edge_counts(ev: Eval) -> dict[int, int]:
    """Edge index -> scored runs that took it at least once."""
    sql = _SQL_EDGES.get(connection.vendor)
    if sql is not None:
        with connection.cursor() as cur:
            cur.execute(sql.format(table=_table()), [ev.pk, *SCORED])
            return {int(index): n for index, n in cur.fetchall()}
    counts: dict[int, int] = defaultdict(int)
    for edges in scored(ev).values_list("edges", flat=True).iterator():
        for index in set(edges or []):
            counts[int(index)] += 1
    return dict(counts)


def coverage(ev: Eval, pack: Pack | None, *, unreached_limit: int = 200) -> dict[str, Any]:
    """Each edge of the pack with the runs that took it; the untaken ones; the runs whose
    declared path or end node was not reached (their `problems`, as the scorer wrote them)."""
    counts = edge_counts(ev)
    runs = scored(ev).count()
    edges = []
    for e in pack.edges if pack is not None else []:
        n = counts.get(e.index, 0)
        edges.append(
            {
                "index": e.index,
                "source": e.source,
                "target": e.target,
                "kind": e.kind,
                "label": e.label,
                "name": edge_name(e),
                "cases": n,
                "share": _ratio(n, runs) or 0.0,
            }
        )
    unreached: list[dict[str, Any]] = []
    missed = 0
    rows = scored(ev).exclude(problems=[]).order_by("case_id", "repeat").values_list("case_id", "repeat", "problems")
    for case_id, repeat, problems in rows.iterator():
        found = (CaseProblem.from_stored(p) for p in problems or [])
        about_path = [p.message for p in found if p.kind in PATH_PROBLEM_KINDS]
        if not about_path:
            continue
        missed += 1
        if len(unreached) < unreached_limit:
            unreached.append({"case_id": case_id, "repeat": repeat, "problems": about_path})
    known = {e.index for e in pack.edges} if pack is not None else set()
    return {
        "runs": runs,
        "taken": sum(1 for e in edges if e["cases"]),
        "total": len(edges),
        "edges": edges,
        "untaken": [e for e in edges if not e["cases"]],
        "counts": counts,
        "unknown_edges": sorted(i for i in counts if i not in known) if pack is not None else [],
        "unreached": unreached,
        "unreached_count": missed,
    }


# -- cost per case ------------------------------------------------------------------------

SORTS = {
    "case": ("case_id", "repeat"),
    "status": ("status", "case_id", "repeat"),
    "cost": ("cost_usd", "case_id", "repeat"),
    "tokens": ("tokens", "case_id", "repeat"),
    "latency": ("latency_s", "case_id", "repeat"),
    "generations": ("generations", "case_id", "repeat"),
}


def cost_table(
    ev: Eval, *, sort: str = "cost", direction: str = "desc", page: int = 1, per_page: int = 100
) -> dict[str, Any]:
    """One page of the eval's runs, sorted by a whitelisted column."""
    sort = sort if sort in SORTS else "cost"
    direction = direction if direction in ("asc", "desc") else "desc"
    count = EvalCase.objects.filter(eval=ev).count()
    pages = max(1, math.ceil(count / per_page))
    page = min(max(1, page), pages)
    prefix = "-" if direction == "desc" else ""
    rows = list(
        EvalCase.objects.filter(eval=ev)
        .annotate(tokens=F("prompt_tokens") + F("completion_tokens") + F("reasoning_tokens"))
        .order_by(*(prefix + f for f in SORTS[sort]))
        .values(
            "case_id",
            "repeat",
            "status",
            "tier",
            "blamed",
            "cost_usd",
            "tokens",
            "prompt_tokens",
            "completion_tokens",
            "reasoning_tokens",
            "latency_s",
            "generations",
            "model_calls",
        )[(page - 1) * per_page : page * per_page]
    )
    return {
        "rows": rows,
        "count": count,
        "page": page,
        "pages": pages,
        "per_page": per_page,
        "sort": sort,
        "dir": direction,
    }


def cost_summary(ev: Eval) -> dict[str, Any]:
    """Cost, tokens and latency per scored run (mean, p50, p95), and every run's cost for
    the histogram: one query of three numbers per run."""
    rows = list(
        scored(ev)
        .annotate(tokens=F("prompt_tokens") + F("completion_tokens") + F("reasoning_tokens"))
        .values_list("cost_usd", "tokens", "latency_s")
    )
    cost = [float(r[0]) for r in rows]
    return {
        "scored": len(rows),
        "values": cost,
        "cost": _spread(cost),
        "cost_total": sum(cost),
        "tokens": _spread([float(r[1]) for r in rows]),
        "latency": _spread([float(r[2]) for r in rows]),
    }


# -- comparing two evals ------------------------------------------------------------------


class NotComparable(Exception):
    """Two evals whose outcomes cannot be paired; the message says why, for a person."""


def _sample(ids: set[str], k: int = 3) -> str:
    shown = sorted(ids)[:k]
    return ", ".join(shown) + (" …" if len(ids) > k else "")


@dataclass
class _Side:
    runs: dict[tuple[str, int], str]

    @property
    def case_ids(self) -> set[str]:
        return {cid for cid, _ in self.runs}

    def rate(self, case_id: str) -> float | None:
        got = [s == Status.PASSED for (cid, _), s in self.runs.items() if cid == case_id and s in SCORED]
        return sum(got) / len(got) if got else None


def compare(a: Eval, b: Eval) -> dict[str, Any]:
    """`a` before, `b` after. Outcomes are paired by (case, repeat) when both evals ran the
    same repeats, else by case, a case passing when most of its repeats pass. Fixed: failed
    in a, passes in b; broken: the reverse. The p-value is the exact McNemar test on them."""
    if a.pk == b.pk:
        raise NotComparable("Both sides are the same eval; choose two different evals.")
    if a.project_id != b.project_id:
        raise NotComparable(
            f"Eval {a.pk} belongs to project {a.project.slug} and eval {b.pk} to {b.project.slug}; "
            "only evals of one project (the same evalset) can be compared."
        )
    sa = _Side({(c, r): s for c, r, s in a.cases.values_list("case_id", "repeat", "status")})
    sb = _Side({(c, r): s for c, r, s in b.cases.values_list("case_id", "repeat", "status")})
    only_a, only_b = sa.case_ids - sb.case_ids, sb.case_ids - sa.case_ids
    if only_a or only_b:
        parts = []
        if only_a:
            parts.append(f"{len(only_a)} case(s) only in eval {a.pk} ({_sample(only_a)})")
        if only_b:
            parts.append(f"{len(only_b)} case(s) only in eval {b.pk} ({_sample(only_b)})")
        raise NotComparable(
            "These evals ran different case sets: " + "; ".join(parts) + ". Compare evals of the same cases "
            "(the same tags), or run the missing cases."
        )
    by_run = set(sa.runs) == set(sb.runs)
    before: list[bool] = []
    after: list[bool] = []
    fixed: list[dict[str, Any]] = []
    broken: list[dict[str, Any]] = []
    skipped = 0
    if by_run:
        for key in sorted(sa.runs):
            x, y = sa.runs[key], sb.runs[key]
            if x not in SCORED or y not in SCORED:
                skipped += 1
                continue
            was, now = x == Status.PASSED, y == Status.PASSED
            before.append(was)
            after.append(now)
            if was != now:
                (fixed if now else broken).append(
                    {"case_id": key[0], "repeat": key[1], "before": float(was), "after": float(now)}
                )
    else:
        for case_id in sorted(sa.case_ids):
            rate_a, rate_b = sa.rate(case_id), sb.rate(case_id)
            if rate_a is None or rate_b is None:
                skipped += 1
                continue
            was, now = rate_a > 0.5, rate_b > 0.5
            before.append(was)
            after.append(now)
            if was != now:
                (fixed if now else broken).append(
                    {"case_id": case_id, "repeat": None, "before": rate_a, "after": rate_b}
                )
    both, n_fixed, n_broken, neither = paired_outcomes(before, after)
    ma, mb = metrics_of(a), metrics_of(b)
    deltas = []
    for name in ma:
        delta = mb[name] - ma[name]
        better = None if abs(delta) < 1e-12 else (delta > 0) == (METRIC_DIRECTIONS.get(name) == "higher")
        deltas.append(
            {
                "metric": name,
                "a": ma[name],
                "b": mb[name],
                "delta": delta,
                "relative": _ratio(delta, ma[name]),
                "better": better,
            }
        )
    pa, pb = sum(before), sum(after)
    return {
        "a": a,
        "b": b,
        "paired_by": "run" if by_run else "case",
        "pairs": len(before),
        "skipped": skipped,
        "both_pass": both,
        "fixed": fixed,
        "broken": broken,
        "both_fail": neither,
        "n_fixed": n_fixed,
        "n_broken": n_broken,
        "p_value": mcnemar_exact(n_fixed, n_broken),
        "pass_a": pa,
        "pass_b": pb,
        "ci_a": wilson_interval(pa, len(before)),
        "ci_b": wilson_interval(pb, len(after)),
        "metrics": deltas,
    }


# -- history over versions ----------------------------------------------------------------


def history(project: Any, order: list[str] | None = None) -> dict[str, Any]:
    """Pass rate and cost per case of every eval of `project`, grouped by pack version.

    `order` lists version shas oldest first (the repository's log); versions not in it
    follow, by their first eval. One series per model; for a version evaluated more than
    once on one model, the latest eval with scored runs is the point."""
    evals = list(Eval.objects.filter(project=project).order_by("created_at", "pk"))
    agg = {
        row["eval"]: row
        for row in (
            EvalCase.objects.filter(eval__project=project, status__in=SCORED)
            .values("eval")
            .annotate(n=Count("id"), passed=Count("id", filter=Q(status=Status.PASSED)), cost=Sum("cost_usd"))
            .order_by()
        )
    }
    rank = {sha: i for i, sha in enumerate(order or [])}
    seen: list[str] = []
    for ev in evals:
        if ev.version not in seen:
            seen.append(ev.version)
    versions = sorted(seen, key=lambda v: (0, rank[v], 0) if v in rank else (1, 0, seen.index(v)))
    index = {v: i for i, v in enumerate(versions)}
    rows = []
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for ev in evals:
        got = agg.get(ev.pk)
        n = got["n"] if got else 0
        row = {
            "eval": ev,
            "version": ev.version,
            "x": index[ev.version],
            "model": ev.model_spec,
            "runs": n,
            "pass_rate": _ratio(got["passed"], n) if got else None,
            "ci95": wilson_interval(got["passed"], n) if got else (0.0, 1.0),
            "cost_per_case": _ratio(got["cost"] or 0.0, n) if got else None,
        }
        rows.append(row)
        if n:
            latest[(ev.model_spec, ev.version)] = row
    series: dict[str, list[dict[str, Any]]] = {}
    for (model, _), row in sorted(latest.items(), key=lambda kv: (kv[0][0], kv[1]["x"])):
        series.setdefault(model, []).append(row)
    return {"versions": versions, "evals": rows, "series": [{"model": m, "points": pts} for m, pts in series.items()]}


# -- the baseline gate --------------------------------------------------------------------


def gate(ev: Eval, baseline: Eval, tolerances: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """One row per metric (metric, baseline, current, limit, ok), by the runtime's own
    check_baseline with its default tolerances, so the studio and `packforge eval
    --baseline` gate alike."""
    document = {"metrics": metrics_of(baseline), "tolerances": {**DEFAULT_TOLERANCES, **(tolerances or {})}}
    return check_baseline(metrics_of(ev), document)


def baseline_for(ev: Eval) -> Eval | None:
    """The project's baseline, when `ev` is a later eval of the same project."""
    base = Eval.objects.filter(project_id=ev.project_id, is_baseline=True).exclude(pk=ev.pk).first()
    if base is None or (base.created_at, base.pk) >= (ev.created_at, ev.pk):
        return None
    return base


def mark_baseline(ev: Eval) -> None:
    """Make `ev` its project's baseline (one per project)."""
    with transaction.atomic():
        Eval.objects.filter(project_id=ev.project_id, is_baseline=True).exclude(pk=ev.pk).update(is_baseline=False)
        Eval.objects.filter(pk=ev.pk).update(is_baseline=True)
    ev.is_baseline = True


def baseline_gate(ev: Eval) -> dict[str, Any]:
    """Does `ev` pass its project's baseline? One row per metric (`gate`), with the
    verdict and a sentence saying it. An eval with no earlier baseline to regress
    against passes, and says so."""
    current = metrics_of(ev)
    if ev.is_baseline:
        return {
            "passes": True,
            "baseline": ev.pk,
            "metrics": current,
            "rows": [],
            "detail": "this eval is the project's baseline",
        }
    baseline = baseline_for(ev)
    if baseline is None:
        return {
            "passes": True,
            "baseline": None,
            "metrics": current,
            "rows": [],
            "detail": "the project has no earlier baseline eval; mark one with POST /api/evals/{id}/baseline",
        }
    rows = gate(ev, baseline)
    failing = [r["metric"] for r in rows if not r["ok"]]
    detail = (
        f"regressed against eval {baseline.pk}: {', '.join(failing)}"
        if failing
        else f"within tolerance of baseline eval {baseline.pk}"
    )
    return {"passes": not failing, "baseline": baseline.pk, "metrics": current, "rows": rows, "detail": detail}


def case_pass_rates(ev: Eval, limit: int = 200) -> list[dict[str, Any]]:
    """With repeats: each case's pass rate over its scored runs, least reliable first."""
    rows = (
        scored(ev)
        .values("case_id")
        .annotate(runs=Count("id"), passed=Count("id", filter=Q(status=EvalCase.Status.PASSED)))
        .order_by("case_id")
    )
    out = [
        {
            "case_id": r["case_id"],
            "runs": r["runs"],
            "passed": r["passed"],
            "rate": r["passed"] / r["runs"] if r["runs"] else 0.0,
        }
        for r in rows
    ]
    out.sort(key=lambda r: (r["rate"], r["case_id"]))
    return out[:limit]
