"""The blame and coverage pages' numbers: per-node totals read from the traces (kept once
an eval's scored rows stop changing) and the edges each run took."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.db import connection
from django.db.models import Count

from runtime import PATH_PROBLEM_KINDS, CaseProblem, Pack
from studio.evals.models import Eval, EvalCase
from studio.evals.results.common import (
    NODE_STATS_VERSION,
    SCORED,
    Status,
    edge_name,
    ended,
    once_per_rows,
    ratio,
    scored,
)

__all__ = ["coverage", "edge_counts", "node_blame", "node_stats"]


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
               SUM(json_extract(a.value, '$.cost_usd')), SUM(json_extract(a.value, '$.cached_tokens'))
        FROM {table} AS c, json_each(c.trace, '$.attempts') AS a
        WHERE c.eval_id = %s AND c.status IN (%s, %s, %s)
        GROUP BY 1, 2, 3, 4""",
    "postgresql": """
        SELECT a.value->>'node', (a.value->>'ok')::boolean,
               CASE WHEN (a.value->>'ok')::boolean THEN NULL ELSE a.value->>'category' END,
               CASE WHEN (a.value->>'ok')::boolean THEN NULL ELSE a.value->>'reason' END, COUNT(*),
               SUM((a.value->>'prompt_tokens')::bigint), SUM((a.value->>'completion_tokens')::bigint),
               SUM((a.value->>'reasoning_tokens')::bigint), SUM((a.value->>'latency_s')::float8),
               SUM((a.value->>'cost_usd')::float8), SUM((a.value->>'cached_tokens')::bigint)
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
        "cached_tokens": 0,
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
    """(node, ok, category, reason, n, prompt, completion, reasoning, latency, cost, cached) groups."""
    sql = _SQL_ATTEMPTS.get(connection.vendor)
    if sql is not None:
        with connection.cursor() as cur:
            cur.execute(sql.format(table=_table()), [ev.pk, *SCORED])
            return cur.fetchall()
    groups: dict[tuple[Any, ...], list[float]] = defaultdict(lambda: [0, 0, 0, 0, 0.0, 0.0, 0])
    for trace in scored(ev).exclude(trace=None).values_list("trace", flat=True).iterator():
        for a in (trace or {}).get("attempts", []):
            g = groups[(a.get("node"), bool(a.get("ok")), a.get("category"), a.get("reason"))]
            for i, key in enumerate(
                ("prompt_tokens", "completion_tokens", "reasoning_tokens", "latency_s", "cost_usd", "cached_tokens"),
                start=1,
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
    for node, ok, category, reason, n, pt, ct, rt, lat, cost, cached in _attempt_groups(ev):
        row = nodes[str(node)]
        row["attempts"] += n
        row["prompt_tokens"] += int(pt or 0)
        row["cached_tokens"] += int(cached or 0)
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


def node_stats(ev: Eval, *, tools: bool = True) -> dict[str, Any]:
    """Per node, over the scored runs' traces: attempts, rejections by category and by
    reason, tokens, latency and cost of its model calls; with `tools`, tool calls and
    their latency (a second pass over the traces, skipped for packs without tool nodes).

    The one costly aggregate of the result pages (the database reads every trace), so it
    is computed once per state of the rows: JSON-serialisable, the backend may store it
    as Eval.summary["node_stats"] when an eval ends (read back here once it has ended);
    otherwise it is kept in Django's cache under a key that changes with the rows."""
    stored = (ev.summary or {}).get("node_stats") if isinstance(ev.summary, dict) else None
    if (
        ended(ev)
        and isinstance(stored, dict)
        and stored.get("version") == NODE_STATS_VERSION
        and isinstance(stored.get("nodes"), dict)
        and (stored.get("tools", True) or not tools)
    ):
        return stored
    name = f"node-stats:v{NODE_STATS_VERSION}:{int(tools)}"
    found: dict[str, Any] = once_per_rows(name, ev, lambda e: _compute_node_stats(e, tools))
    return found


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
                "share": ratio(n, failures) or 0.0,
                "attempts": s["attempts"],
                "rejections": s["rejections"],
                "rejection_rate": ratio(s["rejections"], s["attempts"]),
                "categories": dict(sorted(s["categories"].items(), key=lambda kv: -kv[1])),
                "reasons": [{"category": c, "reason": r, "count": k} for c, r, k in s["reasons"]],
                "tokens": s["tokens"],
                "prompt_tokens": s["prompt_tokens"],
                "cached_tokens": s.get("cached_tokens", 0),
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
                "share": ratio(n, runs) or 0.0,
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
