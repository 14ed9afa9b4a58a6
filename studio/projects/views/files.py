"""The pack file editor: the file list, one file's editor with live validation, save,
create (by saving a new path) and delete.

Every save names the commit the editor was loaded from (`base`). A save on a stale
base is refused with 409 and the diff to the newer version, with the user's text kept
in the textarea: nothing is lost and nothing is silently overwritten. A save that
leaves the pack invalid is allowed (work in progress); its problems are shown."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django import forms
from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from studio.errors import Refused
from studio.http import StudioRequest
from studio.projects.storage import StaleBase, StorageError
from studio.projects.validation import Problem, validate_files
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
    report_saved,
    text_of,
)
from studio.proposals import service as proposals
from studio.proposals.models import Proposal

EDITABLE = re.compile(r"^(manifest\.yaml|graph\.yaml|prompts/[a-z0-9_]+\.txt|grammars/[a-z0-9_]+\.json)$")
DELETABLE = re.compile(r"^(prompts/[a-z0-9_]+\.txt|grammars/[a-z0-9_]+\.json)$")
NAMING = (
    "manifest.yaml, graph.yaml, prompts/<node>.txt or grammars/<node>.json, where a node id uses "
    "lowercase letters, digits and _"
)
NEW_GRAMMAR = '{\n  "type": "object",\n  "properties": {},\n  "required": [],\n  "additionalProperties": false\n}\n'


class SaveForm(forms.Form):
    content = forms.CharField(required=False, strip=False, widget=forms.Textarea)
    base = forms.CharField(
        max_length=40, error_messages={"required": "The editor's base version is missing; reload the file."}
    )
    message = forms.CharField(
        max_length=500, error_messages={"required": "Write a commit message: what changed and why."}
    )


class DeleteForm(forms.Form):
    base = forms.CharField(max_length=40)
    message = forms.CharField(max_length=500, required=False)


@dataclass
class FileEntry:
    path: str
    lines: int
    editable: bool
    problems: int = 0


def _files_context(opened: Opened, files: dict[str, bytes], problems: list[Problem]) -> dict[str, object]:
    counts: dict[str, int] = {}
    for p in problems:
        counts[p.file] = counts.get(p.file, 0) + 1
    entries = [
        FileEntry(
            path,
            data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0),
            bool(EDITABLE.match(path)),
            counts.get(path, 0),
        )
        for path, data in sorted(files.items())
        if path != ".keep"
    ]
    missing = sorted({p.file for p in problems if EDITABLE.match(p.file) and p.file not in files})
    return {"entries": entries, "missing": missing, "base": opened.repo.head() or ""}


def split_problems(problems: list[Problem], path: str) -> tuple[list[Problem], list[tuple[str, list[Problem]]]]:
    """The problems in `path`, and the others grouped by file."""
    mine = [p for p in problems if p.file == path]
    others: dict[str, list[Problem]] = {}
    for p in problems:
        if p.file != path:
            others.setdefault(p.file, []).append(p)
    return mine, sorted(others.items())


def files_index(request: StudioRequest, slug: str) -> HttpResponse:
    opened = open_project(request, slug)
    files = pack_files(opened.repo)
    problems = validate_files(files)[1]
    context = opened.context("files", **_files_context(opened, files, problems), path=None, problems=problems)
    new = request.GET.get("new")
    if new is None:
        return page(request, "projects/files.html", context)
    new = new.strip().lstrip("/")
    if not EDITABLE.match(new):
        context["new_error"] = f"{new!r} is not a pack file the studio edits; name it {NAMING}."
        return page(request, "projects/files.html", context, status=400)
    if new in files:
        context["new_error"] = f"{new} exists already; open it from the list."
        return page(request, "projects/files.html", context, status=400)
    return redirect("projects-file", slug=slug, path=new)


def file_edit(request: StudioRequest, slug: str, path: str) -> HttpResponse:
    opened = open_project(request, slug, edit=request.method == "POST")
    if request.method == "POST":
        return _save(request, opened, path)
    files = pack_files(opened.repo)
    if path in files:
        text = text_of(files[path])
    elif EDITABLE.match(path) and opened.can_edit:
        text = NEW_GRAMMAR if path.startswith("grammars/") else ""
    else:
        raise Http404(f"no file {path} in this pack")
    return _editor(request, opened, path, text, opened.repo.head() or "", files)


def _editor(
    request: StudioRequest,
    opened: Opened,
    path: str,
    text: str,
    base: str,
    files: dict[str, bytes],
    *,
    status: int = 200,
    form: SaveForm | None = None,
    stale: StaleBase | None = None,
    message: str = "",
) -> HttpResponse:
    """The editor for `path` showing `text`, with the pack (at `base`, with `path`
    replaced by `text`) validated beside it."""
    exists = path in files
    trial = dict(files)
    if EDITABLE.match(path):
        trial[path] = form_text(text)
    problems = validate_files(trial)[1]
    mine, others = split_problems(problems, path)
    context = opened.context(
        "files",
        **_files_context(opened, files, problems),
        path=path,
        text=text,
        exists=exists,
        editable=opened.can_edit and bool(EDITABLE.match(path)),
        deletable=bool(DELETABLE.match(path)) and exists,
        problems=problems,
        mine=mine,
        others=others,
        form=form,
        stale=stale,
        message=message,
        stale_changes=changed_files(stale.changes) if stale else [],
    )
    context["base"] = base
    return page(request, "projects/editor.html", context, status=status, fragment="project-page")


def _save(request: StudioRequest, opened: Opened, path: str) -> HttpResponse:
    form = SaveForm(request.POST)
    text = request.POST.get("content", "")
    base = request.POST.get("base", "")
    if not EDITABLE.match(path):
        raise Http404(f"{path} is not a file the studio edits")
    if not form.is_valid():
        files = _files_at(opened, base)
        return _editor(
            request, opened, path, text, base, files, status=400, form=form, message=request.POST.get("message", "")
        )
    data = form.cleaned_data
    author, email = committer(request.user)
    changes: dict[str, bytes | None] = {f"pack/{path}": form_text(data["content"])}
    if ".keep" in _files_at(opened, data["base"]):
        changes["pack/.keep"] = None  # the empty project's placeholder goes with its first file
    if request.POST.get("to") == "proposal":
        return _propose(request, opened, path, changes, form, text)
    try:
        sha = opened.repo.save(changes, base=data["base"], author=author, email=email, message=data["message"])
    except StaleBase as stale:
        # Refused: show what changed since `base`, keep the user's text; saving again
        # (now on the newer head) is a deliberate choice made after seeing that diff.
        return _editor(
            request,
            opened,
            path,
            text,
            stale.head,
            pack_files(opened.repo, stale.head),
            status=409,
            stale=stale,
            message=data["message"],
        )
    except StorageError as exc:
        form.add_error(None, _save_error(exc, data["base"]))
        return _editor(
            request, opened, path, text, base, _files_at(opened, base), status=400, form=form, message=data["message"]
        )
    record_save(opened)
    report_saved(request, opened, sha, data["message"])
    return after_save(request, reverse("projects-file", args=[opened.project.slug, path]))


def _propose(
    request: StudioRequest, opened: Opened, path: str, changes: dict[str, bytes | None], form: SaveForm, text: str
) -> HttpResponse:
    """Open a proposal with this change on top of the editor's base, instead of saving to main."""
    data = form.cleaned_data
    try:
        made = proposals.open_proposal(
            opened.project,
            user=request.user,
            title=data["message"].strip().splitlines()[0],
            description=data["message"],
            changes=changes,
            base=data["base"],
            source=Proposal.Source.EDITOR,
            message=data["message"],
        )
    except Refused as exc:  # a StorageError too: nothing changed, a refused path
        form.add_error(None, _save_error(exc, data["base"]))
        return _editor(
            request,
            opened,
            path,
            text,
            data["base"],
            _files_at(opened, data["base"]),
            status=400,
            form=form,
            message=data["message"],
        )
    messages.success(request, f"Opened proposal #{made.number}; its checks are running.")
    return after_save(request, reverse("proposals-detail", args=[opened.project.slug, made.number]))


def _save_error(exc: Refused, base: str) -> str:
    if str(exc) == "nothing changed":
        return f"Nothing to save: the text is the same as version {base[:10]}."
    return f"Not saved: {exc}."


def _files_at(opened: Opened, base: str) -> dict[str, bytes]:
    try:
        return pack_files(opened.repo, base or None)
    except StorageError:
        return pack_files(opened.repo)


@require_POST
def file_validate(request: StudioRequest, slug: str, path: str) -> HttpResponse:
    """Validate the whole pack at `base` with `path` replaced by the posted text.

    Writes nothing, so any member may call it."""
    opened = open_project(request, slug)
    text = request.POST.get("content", "")
    base = request.POST.get("base", "")
    if not EDITABLE.match(path):
        return _validate_refused(request, opened, path, f"{path} is not a file the studio edits; name it {NAMING}.")
    try:
        files = pack_files(opened.repo, base or None) if base else None
    except StorageError as exc:
        return _validate_refused(request, opened, path, f"Cannot validate: {exc}. Reload the file.")
    if files is None:
        return _validate_refused(
            request, opened, path, "Cannot validate: the editor's base version is missing. Reload the file."
        )
    if not request.htmx:
        return _editor(request, opened, path, text, base, files, message=request.POST.get("message", ""))
    trial = dict(files)
    trial[path] = form_text(text)
    problems = validate_files(trial)[1]
    mine, others = split_problems(problems, path)
    context = opened.context("files", path=path, problems=problems, mine=mine, others=others)
    return page(request, "projects/editor.html", context, fragment="problems")


def _validate_refused(request: StudioRequest, opened: Opened, path: str, error: str) -> HttpResponse:
    context = opened.context("files", path=path, error=error, problems=[], mine=[], others=[])
    return page(request, "projects/editor.html", context, status=400, fragment="problems")


@require_POST
def file_delete(request: StudioRequest, slug: str, path: str) -> HttpResponse:
    opened = open_project(request, slug, edit=True)
    form = DeleteForm(request.POST)
    if not DELETABLE.match(path):
        messages.error(request, f"{path} cannot be deleted; only prompts/<node>.txt and grammars/<node>.json can.")
        return _refused(request, opened, path)
    if not form.is_valid():
        messages.error(request, "The delete form is missing the editor's base version; reload the file.")
        return _refused(request, opened, path)
    base = form.cleaned_data["base"]
    author, email = committer(request.user)
    try:
        sha = opened.repo.save(
            {f"pack/{path}": None},
            base=base,
            author=author,
            email=email,
            message=form.cleaned_data["message"] or f"Delete {path}",
        )
    except StaleBase as stale:
        files = pack_files(opened.repo, stale.head)
        if path not in files:
            raise Http404(f"{path} was deleted by a newer version") from None
        return _editor(request, opened, path, text_of(files[path]), stale.head, files, status=409, stale=stale)
    except StorageError as exc:
        messages.error(request, f"Not deleted: {'the file does not exist' if str(exc) == 'nothing changed' else exc}.")
        return _refused(request, opened, path)
    record_save(opened)
    report_saved(request, opened, sha, form.cleaned_data["message"] or f"Delete {path}")
    return after_save(request, reverse("projects-files", args=[opened.project.slug]))


def _refused(request: StudioRequest, opened: Opened, path: str) -> HttpResponse:
    files = pack_files(opened.repo)
    if path not in files:
        raise Http404(f"no file {path} in this pack")
    return _editor(request, opened, path, text_of(files[path]), opened.repo.head() or "", files, status=400)
