"""The spec API routes (gathered into studio.api under /projects): read the project's
spec (spec/spec.yaml + spec/gold.jsonl) with the compiler loader's verdict, save it,
and the induction report of its gold cases.

Access as for the other project routes (studio.accounts.access): any member reads, only
authors save, a stranger gets 404. A spec that does not load is saved anyway, like a
pack file: the answer says `valid: false` and lists the problems (docs/api.md, "Spec")."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from ninja import Field, Router, Schema, Status
from ninja.errors import HttpError

from compiler import Constraint, Spec
from studio.accounts.access import project_for
from studio.errors import CONFLICT, ERRORS, INVALID, Conflict, NotFound, Refused
from studio.http import StudioRequest
from studio.projects.models import Project
from studio.projects.schemas import ChangeOut, ProblemOut
from studio.projects.specs import GOLD_FILE, SPEC_FILE, check_spec, induction_of, spec_files, spec_repo_path
from studio.projects.storage import PackRepo, StaleBase, StorageError
from studio.projects.validation import Problem
from studio.projects.views import upload_limits

router = Router(tags=["spec"])


class SpecFieldOut(Schema):
    name: str
    description: str
    type: str | None = Field(None, description="the declared JSON type; null: induced from the gold cases")


class SpecRuleOut(Schema):
    text: str
    expr: str | None


class SpecBudgetsOut(Schema):
    attempts: int
    planner_tokens: int
    cost_usd: float


class SpecSummaryOut(Schema):
    name: str
    task: str
    inputs: list[SpecFieldOut]
    outputs: list[SpecFieldOut]
    tools: list[str]
    rules: list[SpecRuleOut]
    unsure_end: str | None
    model: str | None
    budgets: SpecBudgetsOut


class GoldCaseOut(Schema):
    id: str
    line: int = Field(..., description="the case's 1-based line in gold.jsonl")
    input: dict[str, Any]
    expected: dict[str, Any]
    path: list[str] | None
    end: str | None
    tags: list[str]


class SpecOut(Schema):
    version: str
    exists: bool = Field(..., description="whether the project has a spec/ folder (spec.yaml or gold.jsonl)")
    valid: bool = Field(..., description="whether the spec loads with the compiler's loader")
    spec_yaml: str = Field(..., description="spec/spec.yaml as stored ('' when missing)")
    gold_jsonl: str = Field(..., description="spec/gold.jsonl as stored ('' when missing)")
    problems: list[ProblemOut] = Field(
        ..., description="every problem, with its file (spec.yaml or gold.jsonl) and line"
    )
    summary: SpecSummaryOut | None = Field(..., description="the loaded spec; null when it does not load")
    gold: list[GoldCaseOut] = Field(..., description="the gold cases; empty when the spec does not load")


class SpecIn(Schema):
    base: str = Field(..., description="the version the text was read at; a stale base is refused with 409")
    message: str
    spec_yaml: str
    gold_jsonl: str | None = Field(None, description="the new gold.jsonl too, when given")


class SpecSaveOut(Schema):
    version: str = Field(..., description="the new version's sha")
    base: str
    valid: bool
    problems: list[ProblemOut]


class SpecStaleOut(Schema):
    detail: str
    head: str = Field(..., description="the version the project is at now; re-read the spec and save on top of it")
    changes: list[ChangeOut] = Field(..., description="repository paths (spec/..., pack/...) changed since your base")


class ConstraintOut(Schema):
    field: str = Field(..., description="a dotted path: amount, line_items[], line_items[].qty")
    kind: str
    detail: dict[str, Any]
    evidence: dict[str, int] = Field(..., description="the counts it rests on; violations is always 0")


class InducedFieldOut(Schema):
    name: str
    types: list[str] = Field(..., description="JSON types of the non-null values")
    nullable: bool
    cases: int
    present: int
    nulls: int
    induced_schema: dict[str, Any] = Field(..., description="a JSON-schema property every gold value satisfies")
    constraints: list[ConstraintOut]


class InductionOut(Schema):
    version: str
    cases: int
    fields: list[InducedFieldOut]
    relations: list[ConstraintOut]
    copied: dict[str, str] = Field(..., description="output field -> the input field its values are copied from")


def _repo(project: Project) -> PackRepo:
    try:
        return PackRepo(project.repo_path)
    except StorageError as exc:
        raise HttpError(500, f"the repository of {project.slug} is missing: {exc}") from None


def _at(repo: PackRepo, version: str | None) -> tuple[str, dict[str, bytes]]:
    try:
        sha = repo.resolve(version or None)
    except StorageError as exc:
        raise NotFound(str(exc)) from None
    return sha, spec_files(repo, sha)


def _problems(found: list[Problem]) -> list[ProblemOut]:
    return [ProblemOut(file=p.file, line=p.line, message=p.message) for p in found]


def _summary(spec: Spec) -> SpecSummaryOut:
    return SpecSummaryOut(
        name=spec.name,
        task=spec.task,
        inputs=[SpecFieldOut(name=f.name, description=f.description, type=f.type) for f in spec.inputs.values()],
        outputs=[SpecFieldOut(name=f.name, description=f.description, type=f.type) for f in spec.outputs.values()],
        tools=list(spec.tools),
        rules=[SpecRuleOut(text=r.text, expr=r.expr) for r in spec.rules],
        unsure_end=spec.unsure_end,
        model=spec.model,
        budgets=SpecBudgetsOut(
            attempts=spec.budgets.attempts,
            planner_tokens=spec.budgets.planner_tokens,
            cost_usd=spec.budgets.cost_usd,
        ),
    )


def _text(data: bytes | None) -> str:
    return "" if data is None else data.decode("utf-8", errors="replace")


@router.get(
    "/{slug}/spec", response={200: SpecOut, **ERRORS}, summary="The project's spec, checked, with its gold cases"
)
def read_spec(request: StudioRequest, slug: str, version: str | None = None) -> SpecOut:
    project, _ = project_for(request.user, slug)
    sha, files = _at(_repo(project), version)
    spec, problems = check_spec(files)
    return SpecOut(
        version=sha,
        exists=bool(files),
        valid=spec is not None,
        spec_yaml=_text(files.get(SPEC_FILE)),
        gold_jsonl=_text(files.get(GOLD_FILE)),
        problems=_problems(problems),
        summary=_summary(spec) if spec is not None else None,
        gold=[
            GoldCaseOut(
                id=c.id,
                line=c.line,
                input=c.input,
                expected=c.expected,
                path=list(c.path) if c.path is not None else None,
                end=c.end,
                tags=list(c.tags),
            )
            for c in (spec.gold if spec is not None else ())
        ],
    )


@router.put(
    "/{slug}/spec",
    response={200: SpecSaveOut, **ERRORS, 409: SpecStaleOut, **INVALID},
    summary="Save spec.yaml (and optionally gold.jsonl) as a new version",
)
def save_spec(request: StudioRequest, slug: str, body: SpecIn) -> SpecSaveOut | Status[SpecStaleOut]:
    """Refused with 409 (nothing written) when the project moved past `base`. A spec that
    does not load is saved anyway (work in progress): `valid` is false and `problems`
    lists every problem with its file and line."""
    project, _ = project_for(request.user, slug, edit=True)
    if not body.message.strip():
        raise Refused("a save needs a message")
    changes = {SPEC_FILE: body.spec_yaml} | ({GOLD_FILE: body.gold_jsonl} if body.gold_jsonl is not None else {})
    limit = upload_limits().max_file
    data = {name: text.encode("utf-8") for name, text in changes.items()}
    for name, content in data.items():
        if len(content) > limit:
            raise Refused(f"{name} is {len(content)} bytes; the limit per file is {limit}")
    repo = _repo(project)
    try:
        base = repo.resolve(body.base)
    except StorageError as exc:
        raise Refused(f"base: {exc}") from None
    user = request.user
    try:
        sha = repo.save(
            {spec_repo_path(name): content for name, content in data.items()},
            base=base,
            author=user.get_full_name() or user.username,
            email=user.email,
            message=body.message,
        )
    except StaleBase as exc:
        detail = f"{exc}; nothing was saved. Re-read the spec at {exc.head[:10]} and save again"
        changes_out = [ChangeOut(path=c.path, status=c.status) for c in exc.changes]
        return Status(409, SpecStaleOut(detail=detail, head=exc.head, changes=changes_out))
    Project.objects.filter(pk=project.pk).update(head=repo.head() or sha, updated_at=timezone.now())
    spec, problems = check_spec(spec_files(repo, sha))
    return SpecSaveOut(version=sha, base=base, valid=spec is not None, problems=_problems(problems))


def _constraint(c: Constraint) -> ConstraintOut:
    return ConstraintOut(field=c.field, kind=c.kind, detail=c.detail, evidence=c.evidence)


@router.get(
    "/{slug}/spec/induction",
    response={200: InductionOut, **ERRORS, **CONFLICT},
    summary="What the gold cases show about each output: constraints with their evidence",
)
def read_induction(request: StudioRequest, slug: str, version: str | None = None) -> InductionOut:
    """409 when the spec at `version` does not load (GET /spec lists its problems)."""
    project, _ = project_for(request.user, slug)
    sha, files = _at(_repo(project), version)
    spec, problems = check_spec(files)
    if spec is None:
        raise Conflict(
            f"the spec at {sha[:10]} does not load ({len(problems)} problem{'s' if len(problems) != 1 else ''}); "
            "GET /spec lists them",
        )
    induction = induction_of(spec)
    return InductionOut(
        version=sha,
        cases=induction.cases,
        fields=[
            InducedFieldOut(
                name=name,
                types=list(f.types),
                nullable=f.nullable,
                cases=f.cases,
                present=f.present,
                nulls=f.nulls,
                induced_schema=f.schema(),
                constraints=[_constraint(c) for c in f.all_constraints()],
            )
            for name, f in induction.fields.items()
        ],
        relations=[_constraint(c) for c in induction.relations],
        copied=dict(induction.copied),
    )
