"""The Spec tab: edit the project's spec (spec/spec.yaml, spec/gold.jsonl) with live
validation by the compiler's loader, the gold cases as a table, and what induction
finds in them (each constraint with its evidence counts).

Saving works like the pack editor (views/files.py): one commit per save, on the base
the page was loaded from; a stale base is refused with 409 and the diff, the user's text
kept. A spec that does not load is saved anyway (work in progress), its problems shown;
docs/studio-pages.md, "The Spec tab". A project without a spec gets an empty state that
creates a skeleton spec as one commit."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_POST

from compiler import Constraint, Induction
from studio.http import StudioRequest
from studio.projects.evalset import Row, parse_rows
from studio.projects.specs import (
    GOLD_FILE,
    SPEC_FILE,
    SPEC_FILES,
    check_spec,
    induction_of,
    skeleton_files,
    spec_files,
    spec_repo_path,
)
from studio.projects.storage import StaleBase, StorageError
from studio.projects.validation import Problem
from studio.projects.views.common import (
    Opened,
    after_save,
    changed_files,
    committer,
    form_text,
    open_project,
    pack_files,
    page,
    record_save,
    text_of,
)
from studio.projects.views.files import SaveForm, split_problems

EVALSET = "evalset.jsonl"  # the pack's, which a skeleton spec starts from
URL_NAMES = {SPEC_FILE: "projects-spec", GOLD_FILE: "projects-spec-gold"}


@dataclass
class SpecFileEntry:
    name: str
    url: str
    exists: bool
    problems: int


@dataclass
class ConstraintRow:
    field: str
    kind: str
    detail: list[tuple[str, str]]
    evidence: list[tuple[str, int]]


@dataclass
class FieldRow:
    name: str
    types: str
    present: int
    cases: int
    nulls: int
    schema: str
    constraints: list[ConstraintRow]


def _constraint_row(c: Constraint) -> ConstraintRow:
    detail = [(k, v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)) for k, v in c.detail.items()]
    return ConstraintRow(c.field, c.kind, detail, list(c.evidence.items()))


def induction_rows(induction: Induction) -> tuple[list[FieldRow], list[ConstraintRow]]:
    """One row per output field (its constraints under it), and the cross-field relations."""
    fields = [
        FieldRow(
            name,
            "|".join(list(f.types) + (["null"] if f.nullable else [])) or "unknown",
            f.present,
            f.cases,
            f.nulls,
            json.dumps(f.schema(), ensure_ascii=False),
            [_constraint_row(c) for c in f.all_constraints()],
        )
        for name, f in induction.fields.items()
    ]
    return fields, [_constraint_row(c) for c in induction.relations]


def _gold_rows(files: dict[str, bytes], problems: list[Problem]) -> list[tuple[Row, list[Problem]]]:
    by_line: dict[int, list[Problem]] = {}
    for p in problems:
        if p.file == GOLD_FILE and p.line:
            by_line.setdefault(p.line, []).append(p)
    rows = parse_rows(text_of(files.get(GOLD_FILE, b"")))
    return [(row, by_line.get(row.line, [])) for row in rows]


def _spec_context(
    opened: Opened, name: str, text: str, base: str, saved: dict[str, bytes], **extra: Any
) -> dict[str, object]:
    """The page: the editor for `name` showing `text`; the spec (as saved at `base`,
    with `name` replaced by `text`) checked beside it; the gold table and the induction
    report of the spec as saved at `base`."""
    trial = dict(saved)
    trial[name] = form_text(text)
    if trial == saved:  # the page as loaded: the saved spec's check is the same one
        spec, saved_problems = check_spec(saved)
        problems = saved_problems
    else:
        spec, saved_problems = check_spec(saved) if saved else (None, [])
        problems = check_spec(trial)[1]
    mine, others = split_problems(problems, name)
    fields, relations = induction_rows(induction_of(spec)) if spec is not None else ([], [])
    counts: dict[str, int] = {}
    for p in problems:
        counts[p.file] = counts.get(p.file, 0) + 1
    entries = [
        SpecFileEntry(n, reverse(URL_NAMES[n], args=[opened.project.slug]), n in saved, counts.get(n, 0))
        for n in SPEC_FILES
    ]
    return opened.context(
        "spec",
        exists=bool(saved),
        pack_evalset=not saved and _has_evalset(opened, base),
        path=name,
        text=text,
        base=base,
        entries=entries,
        editable=opened.can_edit,
        file_exists=name in saved,
        problems=problems,
        mine=mine,
        others=others,
        validate_url=reverse("projects-spec-validate", args=[opened.project.slug]),
        save_url=reverse(URL_NAMES[name], args=[opened.project.slug]),
        spec=spec,
        saved_problems=saved_problems,
        gold=_gold_rows(saved, saved_problems),
        fields=fields,
        relations=relations,
        **extra,
    )


def _has_evalset(opened: Opened, base: str) -> bool:
    try:
        return EVALSET in pack_files(opened.repo, base or None)
    except StorageError:
        return False


def spec_edit(request: StudioRequest, slug: str) -> HttpResponse:
    return _spec_file(request, slug, SPEC_FILE)


def gold_edit(request: StudioRequest, slug: str) -> HttpResponse:
    return _spec_file(request, slug, GOLD_FILE)


def _spec_file(request: StudioRequest, slug: str, name: str) -> HttpResponse:
    opened = open_project(request, slug, edit=request.method == "POST")
    if request.method == "POST":
        return _save(request, opened, name)
    base = opened.repo.head() or ""
    saved = spec_files(opened.repo, base or None) if base else {}
    context = _spec_context(opened, name, text_of(saved.get(name, b"")), base, saved)
    return page(request, "projects/spec.html", context)


def _saved_at(opened: Opened, base: str) -> dict[str, bytes]:
    try:
        return spec_files(opened.repo, base or None)
    except StorageError:
        return spec_files(opened.repo)


def _save(request: StudioRequest, opened: Opened, name: str) -> HttpResponse:
    form = SaveForm(request.POST)
    text = request.POST.get("content", "")
    base = request.POST.get("base", "")
    message = request.POST.get("message", "")
    if not form.is_valid():
        context = _spec_context(opened, name, text, base, _saved_at(opened, base), form=form, message=message)
        return page(request, "projects/spec.html", context, status=400)
    data = form.cleaned_data
    author, email = committer(request.user)
    try:
        sha = opened.repo.save(
            {spec_repo_path(name): form_text(data["content"])},
            base=data["base"],
            author=author,
            email=email,
            message=data["message"],
        )
    except StaleBase as stale:
        # As in the pack editor: show what changed since `base`, keep the user's text,
        # and base the form on the newer head so saving again is a deliberate choice.
        context = _spec_context(
            opened,
            name,
            text,
            stale.head,
            spec_files(opened.repo, stale.head),
            stale=stale,
            stale_changes=changed_files(stale.changes),
            message=data["message"],
        )
        return page(request, "projects/spec.html", context, status=409)
    except StorageError as exc:
        form.add_error(None, _save_error(exc, data["base"]))
        context = _spec_context(opened, name, text, base, _saved_at(opened, base), form=form, message=message)
        return page(request, "projects/spec.html", context, status=400)
    record_save(opened)
    messages.success(request, f"Saved {sha[:10]}: {data['message'].strip().splitlines()[0]}")
    _, problems = check_spec(spec_files(opened.repo, sha))
    if problems:
        messages.warning(
            request,
            f"The spec has {len(problems)} problem{'s' if len(problems) != 1 else ''} and does not load yet. "
            "It was saved anyway, so work in progress is never lost.",
        )
    return after_save(request, reverse(URL_NAMES[name], args=[opened.project.slug]))


def _save_error(exc: StorageError, base: str) -> str:
    if str(exc) == "nothing changed":
        return f"Nothing to save: the text is the same as version {base[:10]}."
    return f"Not saved: {exc}."


@require_POST
def spec_validate(request: StudioRequest, slug: str) -> HttpResponse:
    """Check the spec at `base` with `file` replaced by the posted text (live validation).
    Writes nothing, so any member may call it."""
    opened = open_project(request, slug)
    name = request.POST.get("file", SPEC_FILE)
    text = request.POST.get("content", "")
    base = request.POST.get("base", "")
    if name not in SPEC_FILES:
        return _validate_refused(
            request, opened, name, f"{name} is not a spec file; the spec is {' and '.join(SPEC_FILES)}."
        )
    if not base:
        return _validate_refused(
            request, opened, name, "Cannot validate: the editor's base version is missing. Reload."
        )
    try:
        saved = spec_files(opened.repo, base)
    except StorageError as exc:
        return _validate_refused(request, opened, name, f"Cannot validate: {exc}. Reload the page.")
    if not request.htmx:
        context = _spec_context(opened, name, text, base, saved, message=request.POST.get("message", ""))
        return page(request, "projects/spec.html", context)
    trial = dict(saved)
    trial[name] = form_text(text)
    _, problems = check_spec(trial)
    mine, others = split_problems(problems, name)
    context = opened.context("spec", path=name, problems=problems, mine=mine, others=others)
    return page(request, "projects/spec.html", context, fragment="problems")


def _validate_refused(request: StudioRequest, opened: Opened, name: str, error: str) -> HttpResponse:
    context = opened.context("spec", path=name, error=error, problems=[], mine=[], others=[])
    return page(request, "projects/spec.html", context, status=400, fragment="problems")


@require_POST
def spec_create(request: StudioRequest, slug: str) -> HttpResponse:
    """Commit a skeleton spec into a project that has none: a name, a task to rewrite,
    and the inputs, outputs and gold cases of the pack's evalset (or, without one, one
    input, one output and a placeholder case; studio.projects.specs.skeleton_files)."""
    opened = open_project(request, slug, edit=True)
    base = request.POST.get("base", "")
    head = opened.repo.head()
    if head and spec_files(opened.repo, head):
        messages.error(request, "This project has a spec already; it was left as it is.")
        return after_save(request, reverse("projects-spec", args=[slug]))
    author, email = committer(request.user)
    evalset = pack_files(opened.repo, head).get(EVALSET) if head else None
    files = skeleton_files(opened.project.slug, evalset)
    message = "Create a skeleton spec" + (" from the pack's evalset" if files[GOLD_FILE] == evalset else "")
    try:
        sha = opened.repo.save(
            {spec_repo_path(n): d for n, d in files.items() if not (n == GOLD_FILE and evalset is not None)},
            base=base or None,
            author=author,
            email=email,
            message=message,
        )
    except StaleBase:
        messages.error(request, "Not created: the project moved on since you loaded the page. Look again.")
        return after_save(request, reverse("projects-spec", args=[slug]))
    except StorageError as exc:
        messages.error(request, f"Not created: {exc}.")
        return after_save(request, reverse("projects-spec", args=[slug]))
    record_save(opened)
    messages.success(request, f"Saved {sha[:10]}: {message}. Rewrite the task and the descriptions.")
    return after_save(request, reverse("projects-spec", args=[slug]))
