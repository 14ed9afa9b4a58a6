"""Project pages. Function views that return early; htmx requests get fragments."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.db import IntegrityError
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render

from runtime import Pack
from studio.accounts.access import visible_projects
from studio.evals.lists import last_evals
from studio.http import StudioRequest
from studio.numbers import pct, whole_number
from studio.projects.archives import ArchiveRefused, Limits, read_archive
from studio.projects.forms import ProjectCreateForm
from studio.projects.graph_svg import draw
from studio.projects.models import Project, create_project, slug_unavailable
from studio.projects.skeleton import skeleton_files
from studio.projects.specs import example_spec_files
from studio.projects.storage import StorageError, UnsafePath
from studio.projects.validation import validate_files
from studio.projects.views.common import (
    SHORT,
    Opened,
    changed_files,
    commit_at,
    commit_of,
    head_commit,
    open_project,
    pack_files,
    page,
)


def with_last_eval(projects: list[Project]) -> list[dict[str, object]]:
    """The projects list's rows: each project with its newest finished eval's pass rate."""
    evals = last_evals([p.pk for p in projects])
    rows: list[dict[str, object]] = []
    for p in projects:
        ev = evals.get(p.pk)
        rate = (ev.summary or {}).get("pass_rate") if ev is not None else None
        rows.append({"project": p, "eval": ev, "pass_text": pct(rate) if isinstance(rate, float | int) else ""})
    return rows


def upload_limits() -> Limits:
    return Limits(settings.UPLOAD_MAX_BYTES, settings.UPLOAD_MAX_FILE_BYTES, settings.UPLOAD_MAX_FILES)


def example_files(name: str) -> dict[str, bytes]:
    root = Path(settings.EXAMPLE_PACKS) / name
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def projects_list(request: StudioRequest) -> HttpResponse:
    return render(request, "projects/list.html", {"projects": with_last_eval(visible_projects(request.user))})


def project_create(request: StudioRequest) -> HttpResponse:
    form = ProjectCreateForm(request.POST or None, request.FILES or None)
    if request.method != "POST" or not form.is_valid():
        return render(request, "projects/create.html", {"form": form}, status=400 if request.method == "POST" else 200)
    data = form.cleaned_data
    slug = data["slug"]
    if Project.objects.filter(slug=slug).exists():
        form.add_error("slug", slug_unavailable(slug, request.user))
        return render(request, "projects/create.html", {"form": form}, status=400)
    spec: dict[str, bytes] = {}
    try:
        if data.get("archive"):
            upload = data["archive"]
            files = read_archive(upload.name, upload.read(), upload_limits())
            message = f"Create from upload {upload.name}"
        elif data.get("example"):
            files = example_files(data["example"])
            spec = example_spec_files(data["example"])
            message = f"Create from example {data['example']}"
        else:
            files, message = skeleton_files(slug), "Create from the skeleton pack"
        create_project(
            slug=slug,
            name=data.get("name") or slug,
            owner=request.user,
            pack_files=files,
            spec_files=spec,
            message=message,
        )
    except ArchiveRefused as exc:
        form.add_error("archive", f"Upload refused: {exc}. Nothing was stored.")
        return render(request, "projects/create.html", {"form": form}, status=400)
    except UnsafePath as exc:
        form.add_error("archive", f"Upload refused: {exc}. Nothing was stored.")
        return render(request, "projects/create.html", {"form": form}, status=400)
    except (StorageError, IntegrityError):  # another create of this slug won, or a repository holds it
        form.add_error("slug", slug_unavailable(slug, request.user))
        return render(request, "projects/create.html", {"form": form}, status=400)
    messages.success(request, f"Project {slug} created.")
    return redirect("projects-overview", slug=slug)


def fallback_edges(pack: Pack) -> set[int]:
    """The `next` edges without `when` that follow a conditional edge from the same node:
    taken only when no earlier edge matched ("otherwise"), not always."""
    conditional: set[str] = set()
    found: set[int] = set()
    for edge in pack.edges:
        if edge.kind != "next":
            continue
        if edge.when is not None:
            conditional.add(edge.source)
        elif edge.source in conditional:
            found.add(edge.index)
    return found


def project_overview(request: StudioRequest, slug: str) -> HttpResponse:
    opened = open_project(request, slug)
    files = pack_files(opened.repo)
    pack, problems = validate_files(files)
    context = opened.context(
        "overview",
        head=head_commit(opened.repo),
        pack=pack,
        problems=problems,
        drawing=draw(pack, label=f"The graph of {opened.project.slug}") if pack is not None else None,
        nodes=list(pack.nodes.values()) if pack is not None else [],
        fallbacks=fallback_edges(pack) if pack is not None else set(),
        # The manifest's description, unless it is the project's own (shown above it).
        pack_description=pack.description
        if pack is not None and " ".join(pack.description.split()) != " ".join(opened.project.description.split())
        else "",
        file_count=len([f for f in files if f != ".keep"]),
    )
    return page(request, "projects/overview.html", context)


HISTORY_PAGE = 50


def project_history(request: StudioRequest, slug: str) -> HttpResponse:
    opened = open_project(request, slug)
    number = whole_number(request.GET.get("page"), minimum=1, maximum=10_000) or 1  # a bad page: the first
    start = (number - 1) * HISTORY_PAGE
    # One more than the page so the last row knows its parent and we know if there is more.
    walked = [commit_of(v) for v in opened.repo.log(limit=start + HISTORY_PAGE + 1)][start:]
    for newer, older in itertools.pairwise(walked):
        newer.parent = older.sha
    commits = walked[:HISTORY_PAGE]
    return page(
        request,
        "projects/history.html",
        opened.context(
            "history",
            commits=commits,
            page_number=number,
            has_older=len(walked) > HISTORY_PAGE,
            newer_url=f"?page={number - 1}",
            older_url=f"?page={number + 1}",
            first_on_page=start + 1,
            last_on_page=start + len(commits),
        ),
    )


def project_diff(request: StudioRequest, slug: str) -> HttpResponse:
    opened = open_project(request, slug)
    a, b = request.GET.get("a", "").strip(), request.GET.get("b", "").strip()
    context = opened.context("history", a=a, b=b)
    if not a or not b:
        context["error"] = "Choose two versions to compare: ?a=SHA&b=SHA (pick them on the History tab)."
        return page(request, "projects/diff.html", context, status=400)
    try:
        old, new = opened.repo.resolve(a), opened.repo.resolve(b)
        changes = changed_files(opened.repo.diff(old, new))
    except StorageError as exc:
        context["error"] = f"Cannot compare these versions: {exc}."
        return page(request, "projects/diff.html", context, status=400)
    context.update(old=commit_at(opened.repo, old), new=commit_at(opened.repo, new), changes=changes)
    return page(request, "projects/diff.html", context)


ARCHIVE_TYPES = {"zip": "application/zip", "tar.gz": "application/gzip"}


def project_download(request: StudioRequest, slug: str) -> HttpResponse:
    opened = open_project(request, slug)
    fmt = request.GET.get("format", "zip")
    version = request.GET.get("version") or None
    if fmt not in ARCHIVE_TYPES:
        return _download_refused(request, opened, f"Unknown format {fmt!r}: use zip or tar.gz.")
    try:
        sha = opened.repo.resolve(version)
        data = opened.repo.archive(sha, fmt, prefix="pack/", folder=opened.project.slug)
    except StorageError as exc:
        return _download_refused(request, opened, f"Cannot download: {exc}.")
    response = HttpResponse(data, content_type=ARCHIVE_TYPES[fmt])
    response["Content-Disposition"] = f'attachment; filename="{opened.project.slug}-{sha[:SHORT]}.{fmt}"'
    return response


def _download_refused(request: StudioRequest, opened: Opened, message: str) -> HttpResponse:
    context = opened.context("history", error=message)
    return page(request, "projects/download_error.html", context, status=400)


@dataclass
class DocBlock:
    heading: int  # 0: a block of text, shown as it is written; 1-6: a heading of that level
    text: str
    anchor: str = ""


def doc_blocks(markdown: str) -> list[DocBlock]:
    """A Markdown document as headings (with anchors) and the text between them, shown
    as written: enough to read the format reference without a Markdown library."""
    blocks: list[DocBlock] = []
    lines: list[str] = []
    fenced = False
    for line in markdown.splitlines():
        fenced ^= line.startswith("```")
        heading = re.match(r"^(#{1,6}) (.+)$", line) if not fenced else None
        if heading is None:
            lines.append(line)
            continue
        if "\n".join(lines).strip():
            blocks.append(DocBlock(0, "\n".join(lines).strip("\n")))
        lines = []
        title = heading.group(2).strip()
        blocks.append(DocBlock(len(heading.group(1)), title, re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")))
    if "\n".join(lines).strip():
        blocks.append(DocBlock(0, "\n".join(lines).strip("\n")))
    return blocks


def pack_format_doc(request: StudioRequest) -> HttpResponse:
    """docs/pack-format.md, for every signed-in user: the skeleton pack's files link here."""
    source = Path(settings.BASE_DIR) / "docs" / "pack-format.md"
    if not source.is_file():
        raise Http404("docs/pack-format.md is not in this installation")
    return render(request, "projects/doc.html", {"blocks": doc_blocks(source.read_text(encoding="utf-8"))})
