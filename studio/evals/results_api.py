"""The eval result routes (gathered into studio.api under /api/evals, beside studio.evals.api):
everything a result page shows, so CI can ask which node failed.

- GET /{id}/blame, /{id}/coverage, /{id}/tiers, /{id}/tags: the blame, coverage and tiers
  pages' numbers, and the pass rate per evalset tag;
- GET /{id}/cases: the per-case table, filtered (status, tier, blamed, tag, end, q) and
  paged; GET /{id}/export?format=csv|jsonl: the same rows, every page, as a file;
- GET /{id}/cases/{case_id}/{repeat}: one run with its case and its trace (rejected
  text for the pack's authors only, as on the page: studio.redaction);
- GET /compare?a=&b=: two evals side by side per case; GET /matrix?evals=1,2,3: several;
- POST /evalset-cases: add an input and its corrected output to a project's evalset (a commit).

Same rules as the pages: any member reads; only authors add cases (403); a stranger
gets 404; a deployment-scoped token is refused (403) by studio.accounts.auth."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from ninja import Router, Status

from studio.accounts.access import eval_for, project_for, run_for
from studio.errors import CONFLICT, ERRORS, INVALID, NotFound, Refused
from studio.evals.evalset_case import add_case
from studio.evals.models import Eval, EvalCase
from studio.evals.results.cases import (
    CaseFilter,
    case_page,
    case_row,
    compare_cases,
    evalset_of,
    export_response,
    matrix,
    tag_breakdown,
)
from studio.evals.results.compare import compare
from studio.evals.results.nodes import coverage, node_blame
from studio.evals.results.summary import tiers
from studio.evals.results_schemas import (
    BlameOut,
    CasePageOut,
    CaseTraceOut,
    ColumnOut,
    CompareOut,
    CoverageOut,
    EvalsetCaseIn,
    EvalsetCaseOut,
    MatrixOut,
    MatrixRowOut,
    MetricDeltaOut,
    PairOut,
    TagOut,
    TiersOut,
)
from studio.evals.views.common import pack_of
from studio.http import StudioRequest
from studio.redaction import sees_rejected_text, visible_trace

router = Router(tags=["eval results"])

ERRORS_ALL = {**ERRORS, **INVALID}
MAX_MATRIX = 8


def _eval(request: StudioRequest, eval_id: int) -> Eval:
    return eval_for(request.user, eval_id)[0]


def _filter(request: StudioRequest) -> CaseFilter:
    return CaseFilter.from_query(request.GET)


@router.get("/compare", response={200: CompareOut, **ERRORS_ALL}, summary="Two evals side by side, per case")
def compare_evals(request: StudioRequest, a: int, b: int, changed: bool = False) -> CompareOut:
    ev_a, ev_b = _eval(request, a), _eval(request, b)
    cmp = compare(ev_a, ev_b)
    pairs = compare_cases(ev_a, ev_b, pack_of(ev_a), pack_of(ev_b), changed_only=changed)
    return CompareOut(
        a=ev_a.pk,
        b=ev_b.pk,
        complete=ev_a.status == Eval.Status.DONE and ev_b.status == Eval.Status.DONE,
        paired_by=cmp["paired_by"],
        pairs=cmp["pairs"],
        skipped=cmp["skipped"],
        fixed=cmp["n_fixed"],
        broken=cmp["n_broken"],
        p_value=cmp["p_value"],
        metrics=[MetricDeltaOut(**{k: m[k] for k in ("metric", "a", "b", "delta", "better")}) for m in cmp["metrics"]],
        cases=[PairOut(**p) for p in pairs],
    )


def parse_ids(raw: str) -> list[int]:
    ids = []
    for part in raw.replace(" ", ",").split(","):
        if not part:
            continue
        if not part.isdigit() or len(part) > 12:
            raise Refused(f"evals: {part!r} is not an eval id; list ids with commas (evals=12,13,14)")
        if int(part) not in ids:
            ids.append(int(part))
    if not 2 <= len(ids) <= MAX_MATRIX:
        raise Refused(f"evals: list 2 to {MAX_MATRIX} eval ids with commas (evals=12,13,14)")
    return ids


def open_matrix(request: StudioRequest, ids: list[int]) -> list[Eval]:
    """The evals of a matrix, each readable by the user (404 otherwise), all of one project."""
    evals = [_eval(request, i) for i in ids]
    if len({ev.project_id for ev in evals}) > 1:
        raise Refused("a matrix compares evals of one project (the same evalset)")
    return evals


@router.get("/matrix", response={200: MatrixOut, **ERRORS_ALL}, summary="Several evals over the same cases")
def eval_matrix(request: StudioRequest, evals: str) -> MatrixOut:
    chosen = open_matrix(request, parse_ids(evals))
    got = matrix(chosen, [pack_of(ev) for ev in chosen])
    return MatrixOut(
        evals=[
            ColumnOut(
                eval=c["eval"].pk,
                version=c["eval"].version,
                model_spec=c["eval"].model_spec,
                status=c["eval"].status,
                **{k: c[k] for k in ("scored", "passed", "pass_rate", "missing")},
            )
            for c in got["columns"]
        ],
        differ=got["differ"],
        rows=[MatrixRowOut(**r) for r in got["rows"]],
    )


@router.post(
    "/evalset-cases",
    response={201: EvalsetCaseOut, **ERRORS, **CONFLICT, **INVALID},
    summary="Add an input and its corrected output to a project's evalset (a commit)",
)
def add_evalset_case(request: StudioRequest, payload: EvalsetCaseIn) -> Status[EvalsetCaseOut]:
    project, _ = project_for(request.user, payload.project, edit=True)
    note, default_id = payload.note.strip(), "case"
    if payload.from_run is not None:
        run, _ = run_for(request.user, payload.from_run)
        if run.project_id != project.pk:
            raise Refused(f"try-it run {run.pk} is not a run of {project.slug}")
        note = note or f"from try-it run {run.pk} ({run.model_spec or 'the pack model'})"
        default_id = f"try-{run.pk}"
    elif payload.from_eval is not None:
        ev, _ = eval_for(request.user, payload.from_eval)
        if ev.project_id != project.pk:
            raise Refused(f"eval {ev.pk} is not an eval of {project.slug}")
        note = note or f"from eval {ev.pk}, case {payload.from_case} run {payload.from_repeat}"
        default_id = f"{payload.from_case or 'case'}-fix"
    saved = add_case(
        project,
        request.user,
        input=payload.input,
        expected=payload.expected,
        case_id=payload.id,
        default_id=default_id,
        tags=payload.tags,
        note=note,
        message=payload.message,
    )
    return Status(201, EvalsetCaseOut(project=project.slug, case_id=saved.case_id, commit=saved.sha))


@router.get("/{eval_id}/blame", response={200: BlameOut, **ERRORS_ALL}, summary="Failures blamed per node")
def blame(request: StudioRequest, eval_id: int) -> BlameOut:
    ev = _eval(request, eval_id)
    got = node_blame(ev, pack_of(ev))
    return BlameOut(eval=ev.pk, failures=got["failures"], unblamed=got["unblamed"], nodes=got["nodes"])


@router.get("/{eval_id}/coverage", response={200: CoverageOut, **ERRORS_ALL}, summary="Edges taken and untaken")
def edge_coverage(request: StudioRequest, eval_id: int) -> CoverageOut:
    ev = _eval(request, eval_id)
    got = coverage(ev, pack_of(ev))
    keys = ("runs", "taken", "total", "edges", "untaken", "unreached", "unreached_count", "unknown_edges")
    return CoverageOut(eval=ev.pk, **{k: got[k] for k in keys})


@router.get("/{eval_id}/tiers", response={200: TiersOut, **ERRORS_ALL}, summary="Runs, accuracy and cost per tier")
def eval_tiers(request: StudioRequest, eval_id: int) -> TiersOut:
    ev = _eval(request, eval_id)
    got = tiers(ev)
    return TiersOut(eval=ev.pk, total=got["total"], auto_accuracy=got["auto_accuracy"], tiers=got["rows"])


@router.get("/{eval_id}/tags", response={200: list[TagOut], **ERRORS_ALL}, summary="Pass rate per evalset tag")
def eval_tags(request: StudioRequest, eval_id: int) -> list[TagOut]:
    ev = _eval(request, eval_id)
    return [TagOut(**r) for r in tag_breakdown(ev, pack_of(ev))]


@router.get("/{eval_id}/cases", response={200: CasePageOut, **ERRORS_ALL}, summary="The per-case table, filtered")
def eval_cases(request: StudioRequest, eval_id: int, page: int = 1, per_page: int = 50) -> CasePageOut:
    ev = _eval(request, eval_id)
    f = _filter(request)
    got = case_page(ev, f, pack_of(ev), page=max(1, page), per_page=max(1, min(per_page, 500)))
    return CasePageOut(
        eval=ev.pk,
        filters=f.params(),
        count=got["count"],
        page=got["page"],
        pages=got["pages"],
        per_page=got["per_page"],
        cases=got["rows"],
    )


@router.get(
    "/{eval_id}/export",
    response={200: None, **ERRORS_ALL},
    summary="Every run of the per-case table (filtered) as CSV or JSONL",
)
def export(request: StudioRequest, eval_id: int, format: str = "csv") -> StreamingHttpResponse:
    ev = _eval(request, eval_id)
    return export_response(ev, _filter(request), pack_of(ev), format)


@router.get(
    "/{eval_id}/cases/{path:case_id}/{repeat}",
    response={200: CaseTraceOut, **ERRORS_ALL},
    summary="One run: its case, outcome and trace (rejected text for authors only)",
)
def eval_case(request: StudioRequest, eval_id: int, case_id: str, repeat: int) -> CaseTraceOut:
    ev, role = eval_for(request.user, eval_id)
    row = EvalCase.objects.filter(eval=ev, case_id=case_id, repeat=repeat).first()
    if row is None:
        raise NotFound(f"eval {ev.pk} has no run of case {case_id!r} repeat {repeat}")
    pack = pack_of(ev)
    trace = row.trace if isinstance(row.trace, dict) else None
    shown = visible_trace(trace, role) if trace is not None else None
    return CaseTraceOut(
        eval=ev.pk,
        **case_row(row, evalset_of(pack), pack),
        diffs=[d for d in row.diffs or [] if isinstance(d, dict)],
        problems=list(row.problems or []),
        trace=shown,
        rejected_text_shown=sees_rejected_text(role),
    )
