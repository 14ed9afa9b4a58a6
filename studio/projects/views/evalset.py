"""The evalset as a table of cases: add, edit and delete a case, each one commit.

A case is addressed by its line number in the version the page was loaded from
(`base`); a save on a stale base is refused with 409 and the diff, the form kept as
typed, and the case found again by its id in the newer version."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_POST

from studio.http import StudioRequest
from studio.projects.evalset import FILE, CaseForm, Row, append_line, case_line, initial_for, parse_rows, replace_line
from studio.projects.storage import StaleBase, StorageError
from studio.projects.validation import Problem, validate_files
from studio.projects.views.common import (
    Opened,
    after_save,
    changed_files,
    committer,
    open_project,
    pack_files,
    page,
    record_save,
    report_saved,
)


def _evalset_text(opened: Opened, version: str | None) -> str:
    data = opened.repo.files(version, prefix="pack/").get(FILE, b"")
    return data.decode("utf-8", errors="replace")


def _row(rows: list[Row], line: int) -> Row:
    for row in rows:
        if row.line == line:
            return row
    raise Http404(f"no case on line {line} of {FILE}")


def evalset_table(request: StudioRequest, slug: str) -> HttpResponse:
    opened = open_project(request, slug)
    return _table(request, opened)


def _table(
    request: StudioRequest,
    opened: Opened,
    *,
    status: int = 200,
    stale: StaleBase | None = None,
    fragment: str = "project-page",
) -> HttpResponse:
    head = opened.repo.head() or ""
    files = pack_files(opened.repo, head)
    rows = parse_rows(files.get(FILE, b"").decode("utf-8", errors="replace"))
    by_line: dict[int, list[Problem]] = {}
    loose: list[Problem] = []
    for problem in validate_files(files)[1]:
        if problem.file == FILE and problem.line:
            by_line.setdefault(problem.line, []).append(problem)
        elif problem.file == FILE:
            loose.append(problem)
    query = request.GET.get("q", "").strip()
    shown = [row for row in rows if row.matches(query)] if query else rows
    context = opened.context(
        "evalset",
        rows=[(row, by_line.get(row.line, [])) for row in shown],
        total=len(rows),
        query=query,
        loose=loose,
        base=head,
        stale=stale,
        stale_changes=changed_files(stale.changes) if stale else [],
    )
    return page(request, "projects/evalset.html", context, status=status, fragment=fragment)


def evalset_case(request: StudioRequest, slug: str, line: int | None = None) -> HttpResponse:
    """GET: the form for a new case (no line) or the case on `line`; POST: save it."""
    opened = open_project(request, slug, edit=True)
    if request.method == "POST":
        return _save_case(request, opened, line)
    head = opened.repo.head() or ""
    row = _row(parse_rows(_evalset_text(opened, head)), line) if line is not None else None
    initial = {**initial_for(row), "base": head, "message": f"Edit case {row.id}" if row else "Add a case"}
    return _form_page(request, opened, CaseForm(initial=initial), line, row)


def _form_page(
    request: StudioRequest,
    opened: Opened,
    form: CaseForm,
    line: int | None,
    row: Row | None,
    *,
    status: int = 200,
    stale: StaleBase | None = None,
    note: str = "",
) -> HttpResponse:
    action = (
        reverse("projects-evalset-case", args=[opened.project.slug, line])
        if line is not None
        else reverse("projects-evalset-new", args=[opened.project.slug])
    )
    context = opened.context(
        "evalset",
        form=form,
        line=line,
        row=row,
        action=action,
        stale=stale,
        note=note,
        stale_changes=changed_files(stale.changes) if stale else [],
    )
    return page(
        request,
        "projects/evalset_case.html",
        context,
        status=status,
        fragment="case-form" if request.htmx else "project-page",
    )


def _save_case(request: StudioRequest, opened: Opened, line: int | None) -> HttpResponse:
    base = request.POST.get("base", "")
    try:
        text = _evalset_text(opened, base or None) if base else None
    except StorageError:
        text = None
    row = _row(parse_rows(text), line) if text is not None and line is not None else None
    taken = {r.id for r in parse_rows(text or "") if row is None or r.line != row.line}
    form = CaseForm(request.POST, taken=taken)
    if text is None:
        form.add_error(None, "This form's base version is missing or unknown; reload the evalset and try again.")
        return _form_page(request, opened, form, line, row, status=400)
    if not form.is_valid():
        return _form_page(request, opened, form, line, row, status=400)
    new_line = case_line(form.case(row.case if row else None))
    new_text = replace_line(text, row.line, new_line) if row else append_line(text, new_line)
    author, email = committer(request.user)
    message = form.cleaned_data["message"]
    try:
        sha = opened.repo.save(
            {f"pack/{FILE}": new_text.encode()}, base=base, author=author, email=email, message=message
        )
    except StaleBase as stale:
        return _stale_case(request, opened, form, row, stale)
    except StorageError as exc:
        form.add_error(
            None, "Nothing to save: the case is unchanged." if str(exc) == "nothing changed" else f"Not saved: {exc}."
        )
        return _form_page(request, opened, form, line, row, status=400)
    record_save(opened)
    report_saved(request, opened, sha, message)
    return after_save(request, reverse("projects-evalset", args=[opened.project.slug]))


def _stale_case(
    request: StudioRequest, opened: Opened, form: CaseForm, row: Row | None, stale: StaleBase
) -> HttpResponse:
    """Refuse, keep what was typed, and point the form at the same case (by id) in
    the newer version, so saving again is a deliberate choice made after the diff."""
    data = request.POST.copy()
    data["base"] = stale.head
    newer = parse_rows(_evalset_text(opened, stale.head))
    line, note = None, ""
    if row is not None:
        match = [r for r in newer if r.id == row.id]
        if match:
            line = match[0].line
        else:
            note = f"The case {row.id} is no longer in the evalset; saving again adds it as a new case."
    return _form_page(
        request,
        opened,
        CaseForm(data, taken=set()),
        line,
        _row(newer, line) if line is not None else None,
        status=409,
        stale=stale,
        note=note,
    )


@require_POST
def evalset_delete(request: StudioRequest, slug: str, line: int) -> HttpResponse:
    opened = open_project(request, slug, edit=True)
    base = request.POST.get("base", "")
    try:
        text = _evalset_text(opened, base) if base else None
    except StorageError:
        text = None
    if text is None:
        messages.error(request, "The delete form's base version is missing or unknown; reload the evalset.")
        return _table(request, opened, status=400)
    row = _row(parse_rows(text), line)
    message = request.POST.get("message", "").strip() or f"Delete case {row.id}"
    author, email = committer(request.user)
    try:
        sha = opened.repo.save(
            {f"pack/{FILE}": replace_line(text, row.line, None).encode()},
            base=base,
            author=author,
            email=email,
            message=message,
        )
    except StaleBase as stale:
        messages.error(
            request,
            f"Case {row.id} was not deleted: the evalset changed since you loaded it. "
            "Check the changes below and delete it again if you still want to.",
        )
        return _table(request, opened, status=409, stale=stale)
    except StorageError as exc:
        messages.error(request, f"Not deleted: {exc}.")
        return _table(request, opened, status=400)
    record_save(opened)
    report_saved(request, opened, sha, message)
    return after_save(request, reverse("projects-evalset", args=[opened.project.slug]))
