"""The per-case table: every run of an eval with its case's input, expected output, the
output it produced, its tier, blamed node and end node; filtered (status, tier, blamed
node, tag, end node, text search in inputs), paged, exported (CSV, JSONL); the pass rate
per tag; two evals side by side per case, and a matrix of several evals over one case set.

The evalset's side of a case (input, expected, tags) comes from the pack at the eval's
version (the rows store outcomes, not inputs); a run whose case is not in that evalset
any more shows empty input and expected. The output of a run is what its trace
committed, restricted to the output fields of the node it ended at (else the pack's),
as runtime.walker builds a run's output; a run that did not finish has no output.

Tier names are the words people read (runtime.TIER_WORDS): the stored "failed" tier is
"unanswered" everywhere a person or a client sees it, and a filter takes that word."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from django.db.models import Count, Q, QuerySet
from django.http import StreamingHttpResponse

from runtime import TIER_WORDS, Case, Pack
from studio.errors import Refused
from studio.evals.models import Eval, EvalCase
from studio.evals.results.common import SCORED, Status, once_per_rows, ratio

__all__ = [
    "EXPORT_COLUMNS",
    "STATUSES",
    "TIER_NAMES",
    "BadFilter",
    "CaseFilter",
    "case_page",
    "case_row",
    "compare_cases",
    "csv_text",
    "evalset_of",
    "export_response",
    "export_rows",
    "filtered",
    "jsonl_lines",
    "matrix",
    "output_of",
    "stored_tier",
    "tag_breakdown",
    "tier_word",
]

STATUSES = tuple(s.value for s in Status)
TIER_NAMES = tuple(TIER_WORDS.values())
PER_PAGE = 50
EXPORT_COLUMNS = (
    "case_id",
    "repeat",
    "status",
    "tier",
    "blamed",
    "end_node",
    "tags",
    "input",
    "expected",
    "output",
    "error",
    "generations",
    "tokens",
    "latency_s",
    "cost_usd",
)


class BadFilter(Refused):
    """A filter value the table does not know; the message says which values it takes."""


def tier_word(stored: str) -> str:
    """The word shown for a stored tier (an empty tier is a run that did not finish)."""
    return TIER_WORDS.get(stored or "failed", stored)


def stored_tier(word: str) -> str:
    for stored, shown in TIER_WORDS.items():
        if word == shown:
            return stored
    raise BadFilter(f"unknown tier {word!r}; tiers are {', '.join(TIER_NAMES)}")


UNTAGGED = "(untagged)"  # the tag filter's and the tag table's name for "no tag at all"


@dataclass(frozen=True)
class CaseFilter:
    status: str = ""
    tier: str = ""
    blamed: str = ""
    tag: str = ""
    end: str = ""
    q: str = ""

    @classmethod
    def from_query(cls, query: Mapping[str, Any]) -> CaseFilter:
        """From a query string (a QueryDict or a dict); BadFilter for an unknown status or tier."""
        got = cls(**{k: str(query.get(k) or "").strip()[:200] for k in ("status", "tier", "blamed", "tag", "end", "q")})
        if got.status and got.status not in STATUSES:
            raise BadFilter(f"unknown status {got.status!r}; statuses are {', '.join(STATUSES)}")
        if got.tier:
            stored_tier(got.tier)
        return got

    def params(self) -> dict[str, str]:
        """The filters that are set, as query parameters."""
        return {k: v for k, v in asdict(self).items() if v}

    @property
    def active(self) -> bool:
        return bool(self.params())


def evalset_of(pack: Pack | None) -> dict[str, Case]:
    return {c.id: c for c in pack.cases} if pack is not None else {}


def _input_text(case: Case) -> str:
    return json.dumps(case.input, ensure_ascii=False, sort_keys=True).lower()


def filtered(ev: Eval, f: CaseFilter, pack: Pack | None) -> QuerySet[EvalCase]:
    """The eval's runs that pass every filter, in case order. Tag and text search read the
    evalset at the eval's version (the rows do not store inputs); the rest is one query."""
    rows = EvalCase.objects.filter(eval=ev)
    if f.status:
        rows = rows.filter(status=f.status)
    if f.tier:
        stored = stored_tier(f.tier)
        # a scored run without a tier did not finish: the runtime counts it in "failed"
        rows = (
            rows.filter(Q(tier=stored) | Q(tier="", status__in=SCORED))
            if stored == "failed"
            else rows.filter(tier=stored)
        )
    if f.blamed:
        rows = rows.filter(blamed=f.blamed)
    if f.end:
        rows = rows.filter(trace__end_node=f.end)
    if f.tag or f.q:
        cases = evalset_of(pack).values()
        needle = f.q.lower()
        ids = [
            c.id
            for c in cases
            if (not f.tag or f.tag in c.tags or (f.tag == UNTAGGED and not c.tags))
            and (not needle or needle in _input_text(c) or needle in c.id.lower())
        ]
        rows = rows.filter(case_id__in=ids)
    return rows.order_by("case_id", "repeat")


def output_of(trace: Mapping[str, Any] | None, pack: Pack | None) -> dict[str, Any] | None:
    """What the run answered: its committed values, restricted to the output fields of
    the node it ended at (else the pack's). None for a run that did not finish."""
    if not trace or trace.get("status") != "done":
        return None
    state: dict[str, Any] = {}
    for step in trace.get("steps") or []:
        if step.get("status") == "ok" and isinstance(step.get("writes"), dict):
            state.update(step["writes"])
    fields: Iterable[str] | None = None
    if pack is not None:
        end = pack.nodes.get(str(trace.get("end_node") or ""))
        fields = (getattr(end, "output", None) if end is not None else None) or pack.output
    if fields is None:
        return state
    return {k: state[k] for k in fields if k in state}


def case_row(row: EvalCase, cases: Mapping[str, Case], pack: Pack | None) -> dict[str, Any]:
    """One run as the table, the export and the API show it."""
    trace = row.trace if isinstance(row.trace, dict) else {}
    case = cases.get(row.case_id)
    finished = row.status in SCORED
    return {
        "case_id": row.case_id,
        "repeat": row.repeat,
        "status": row.status,
        "tier": tier_word(row.tier) if finished else (TIER_WORDS.get(row.tier, row.tier) if row.tier else ""),
        "blamed": row.blamed,
        "end_node": trace.get("end_node") or "",
        "tags": list(case.tags) if case is not None else [],
        "input": case.input if case is not None else None,
        "expected": case.expected if case is not None else None,
        "output": output_of(trace, pack),
        "error": row.error or str(trace.get("error") or ""),
        "generations": row.generations,
        "tokens": row.prompt_tokens + row.completion_tokens + row.reasoning_tokens,
        "latency_s": row.latency_s,
        "cost_usd": row.cost_usd,
    }


def case_page(ev: Eval, f: CaseFilter, pack: Pack | None, *, page: int = 1, per_page: int = PER_PAGE) -> dict[str, Any]:
    """One page of the filtered runs, with the count and the number of pages."""
    rows = filtered(ev, f, pack)
    count = rows.count()
    pages = max(1, math.ceil(count / per_page))
    page = min(max(1, page), pages)
    cases = evalset_of(pack)
    got = [case_row(r, cases, pack) for r in rows[(page - 1) * per_page : page * per_page]]
    return {"rows": got, "count": count, "page": page, "pages": pages, "per_page": per_page}


def export_rows(ev: Eval, f: CaseFilter, pack: Pack | None) -> Iterator[dict[str, Any]]:
    cases = evalset_of(pack)
    for r in filtered(ev, f, pack).iterator(chunk_size=500):
        yield case_row(r, cases, pack)


# A number in the CSV has the places the page shows it with at its finest (cost: $0.000135,
# latency: 12.3 ms), so a sum of per-call costs (0.00013499999999999997) reads as on the page.
CSV_PLACES = {"cost_usd": 6, "latency_s": 4}


def _cell(value: Any, places: int | None = None) -> str:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    if isinstance(value, float):
        if places is not None:
            return f"{round(value, places) + 0.0:.{places}f}".rstrip("0").rstrip(".")  # + 0.0: no "-0"
        # Other floats: 12 significant digits keep every real digit and drop binary noise.
        return f"{value:.12g}"
    if not isinstance(value, str):
        return str(value)
    # A spreadsheet runs a cell that starts like a formula; inputs and model output are
    # not formulas, so such a text is written as text (a leading apostrophe).
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def csv_text(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    """The rows as CSV, header first; JSON columns (input, expected, output, tags) as JSON text."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(EXPORT_COLUMNS)
    for row in rows:
        writer.writerow([_cell(row[c], CSV_PLACES.get(c)) for c in EXPORT_COLUMNS])
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
    if buffer.getvalue():
        yield buffer.getvalue()


def jsonl_lines(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    for row in rows:
        yield json.dumps({c: row[c] for c in EXPORT_COLUMNS}, ensure_ascii=False, sort_keys=True) + "\n"


def export_response(ev: Eval, f: CaseFilter, pack: Pack | None, fmt: str) -> StreamingHttpResponse:
    """Every filtered run as a CSV or JSONL download, streamed a row at a time (the page's
    button and the API's route both answer with it); BadFilter for another format."""
    rows = export_rows(ev, f, pack)
    if fmt == "csv":
        response = StreamingHttpResponse(csv_text(rows), content_type="text/csv; charset=utf-8")
    elif fmt == "jsonl":
        response = StreamingHttpResponse(jsonl_lines(rows), content_type="application/x-ndjson; charset=utf-8")
    else:
        raise BadFilter(f"format {fmt!r}: use csv or jsonl")
    response["Content-Disposition"] = f'attachment; filename="eval-{ev.pk}-cases.{fmt}"'
    return response


def tag_breakdown(ev: Eval, pack: Pack | None) -> list[dict[str, Any]]:
    """Pass rate per evalset tag over the scored runs (a case with several tags counts in
    each); cases without a tag under UNTAGGED."""
    cases = evalset_of(pack)
    per_case = {
        r["case_id"]: r
        for r in EvalCase.objects.filter(eval=ev, status__in=SCORED)
        .values("case_id")
        .annotate(runs=Count("id"), n_passed=Count("id", filter=Q(status=Status.PASSED)))
        .order_by()
    }
    totals: dict[str, list[int]] = {}
    for case_id, got in per_case.items():
        case = cases.get(case_id)
        for tag in case.tags if case is not None and case.tags else (UNTAGGED,):
            into = totals.setdefault(tag, [0, 0, 0])
            into[0] += 1
            into[1] += got["runs"]
            into[2] += got["n_passed"]
    return [
        {"tag": tag, "cases": n_cases, "runs": runs, "passed": passed, "pass_rate": ratio(passed, runs)}
        for tag, (n_cases, runs, passed) in sorted(totals.items(), key=lambda kv: (kv[0] == UNTAGGED, kv[0]))
    ]


# -- several evals over the same cases ------------------------------------------------------


def _outcomes(ev: Eval, pack: Pack | None) -> dict[tuple[str, int], dict[str, Any]]:
    """Each run's status, tier, blame and output, read once per state of the eval's rows,
    every row's status included."""
    found: dict[tuple[str, int], dict[str, Any]] = once_per_rows(
        f"outcomes:v2:{int(pack is not None)}", ev, lambda e: _read_outcomes(e, pack), every_row=True
    )
    return found


def _read_outcomes(ev: Eval, pack: Pack | None) -> dict[tuple[str, int], dict[str, Any]]:
    """The stored outputs; a trace is read only for a finished row without one (no answer,
    or scored before outputs were stored)."""
    rows = list(
        EvalCase.objects.filter(eval=ev).values_list("pk", "case_id", "repeat", "status", "tier", "blamed", "output")
    )
    unstored = [pk for pk, _, _, status, _, _, output in rows if output is None and status in SCORED]
    traces = dict(EvalCase.objects.filter(pk__in=unstored).values_list("pk", "trace").iterator()) if unstored else {}
    return {
        (case_id, repeat): {
            "status": status,
            "tier": tier_word(tier) if status in SCORED else "",
            "blamed": blamed,
            "output": output if output is not None else output_of(_dict_or_none(traces.get(pk)), pack),
        }
        for pk, case_id, repeat, status, tier, blamed, output in rows
    }


def _dict_or_none(trace: Any) -> dict[str, Any] | None:
    return trace if isinstance(trace, dict) else None


def compare_cases(
    a: Eval, b: Eval, pack_a: Pack | None, pack_b: Pack | None, *, changed_only: bool = False
) -> list[dict[str, Any]]:
    """Per (case, repeat) of either eval: A's status and output, B's, and each side's own
    expected output (`expected_a`, `expected_b`: its version's evalset); `evalset_changed`
    when the case differs between the two evalsets (its input or expected, or it is in
    one only). `expected` is B's, else A's. Changed outcomes first."""
    got_a, got_b = _outcomes(a, pack_a), _outcomes(b, pack_b)
    cases_a, cases_b = evalset_of(pack_a), evalset_of(pack_b)
    cases = {**cases_a, **cases_b}
    rows = []
    for key in sorted(set(got_a) | set(got_b)):
        x, y = got_a.get(key), got_b.get(key)
        changed = (x or {}).get("status") != (y or {}).get("status")
        if changed_only and not changed:
            continue
        case = cases.get(key[0])
        rows.append(
            {
                "case_id": key[0],
                "repeat": key[1],
                "a": x,
                "b": y,
                "expected": case.expected if case is not None else None,
                "expected_a": _expected(cases_a, key[0]),
                "expected_b": _expected(cases_b, key[0]),
                "evalset_changed": _differs(cases_a, cases_b, key[0]),
                "input": case.input if case is not None else None,
                "changed": changed,
                "same_output": x is not None and y is not None and x["output"] == y["output"],
            }
        )
    rows.sort(key=lambda r: (not r["changed"], r["case_id"], r["repeat"]))
    return rows


def _expected(cases: Mapping[str, Case], case_id: str) -> dict[str, Any] | None:
    case = cases.get(case_id)
    return case.expected if case is not None else None


def _differs(a: Mapping[str, Case], b: Mapping[str, Case], case_id: str) -> bool:
    x, y = a.get(case_id), b.get(case_id)
    if x is None or y is None:
        return (x is None) != (y is None)
    return (x.input, x.expected) != (y.input, y.expected)


def matrix(evals: list[Eval], packs: list[Pack | None]) -> dict[str, Any]:
    """Cases down, evals across (promptfoo's view): each cell the run's status, tier and
    output; the expected output beside each case; per eval its pass rate over the cells.
    With repeats, the first repeat (0) of each case is shown."""
    outcomes = [_outcomes(ev, pack) for ev, pack in zip(evals, packs, strict=True)]
    evalsets = [evalset_of(pack) for pack in packs]
    cases: dict[str, Case] = {}
    for evalset in evalsets:
        cases.update(evalset)
    ids = sorted({cid for got in outcomes for (cid, rep) in got if rep == 0})
    rows = []
    for cid in ids:
        cells = [got.get((cid, 0)) for got in outcomes]
        statuses = {c["status"] if c else None for c in cells}
        case = cases.get(cid)
        rows.append(
            {
                "case_id": cid,
                "input": case.input if case is not None else None,
                "expected": case.expected if case is not None else None,
                "expected_by_eval": [_expected(evalset, cid) for evalset in evalsets],
                "evalset_changed": any(_differs(evalsets[0], other, cid) for other in evalsets[1:]),
                "cells": cells,
                "differs": len(statuses) > 1,
            }
        )
    columns = []
    for ev, got in zip(evals, outcomes, strict=True):
        scored_cells = [c for (cid, rep), c in got.items() if rep == 0 and c["status"] in SCORED]
        passed = sum(1 for c in scored_cells if c["status"] == Status.PASSED)
        columns.append(
            {
                "eval": ev,
                "scored": len(scored_cells),
                "passed": passed,
                "pass_rate": ratio(passed, len(scored_cells)),
                "missing": len(ids) - sum(1 for (cid, rep) in got if rep == 0),
            }
        )
    return {"columns": columns, "rows": rows, "differ": sum(1 for r in rows if r["differs"])}
