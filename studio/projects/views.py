"""Project pages. Function views that return early; htmx requests get fragments."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.db import IntegrityError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from studio.accounts.access import visible_projects
from studio.projects.archives import ArchiveRefused, Limits, read_archive
from studio.projects.forms import ProjectCreateForm
from studio.projects.models import Project, create_project
from studio.projects.storage import StorageError


def upload_limits() -> Limits:
    return Limits(settings.UPLOAD_MAX_BYTES, settings.UPLOAD_MAX_FILE_BYTES, settings.UPLOAD_MAX_FILES)


def example_files(name: str) -> dict[str, bytes]:
    root = Path(settings.EXAMPLE_PACKS) / name
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def projects_list(request: HttpRequest) -> HttpResponse:
    return render(request, "projects/list.html", {"projects": visible_projects(request.user)})


def project_create(request: HttpRequest) -> HttpResponse:
    form = ProjectCreateForm(request.POST or None, request.FILES or None)
    if request.method != "POST" or not form.is_valid():
        return render(request, "projects/create.html", {"form": form}, status=400 if request.method == "POST" else 200)
    data = form.cleaned_data
    slug = data["slug"]
    if Project.objects.filter(slug=slug).exists():
        form.add_error("slug", "A project with this slug exists.")
        return render(request, "projects/create.html", {"form": form}, status=400)
    try:
        if data.get("archive"):
            upload = data["archive"]
            files = read_archive(upload.name, upload.read(), upload_limits())
            message = f"Create from upload {upload.name}"
        elif data.get("example"):
            files = example_files(data["example"])
            message = f"Create from example {data['example']}"
        else:
            files, message = {}, "Create empty project"
        create_project(slug=slug, name=data.get("name") or slug, owner=request.user, pack_files=files,
                       message=message)
    except ArchiveRefused as exc:
        form.add_error("archive", f"Upload refused: {exc}. Nothing was stored.")
        return render(request, "projects/create.html", {"form": form}, status=400)
    except (StorageError, IntegrityError) as exc:
        form.add_error(None, f"Could not create the project: {exc}")
        return render(request, "projects/create.html", {"form": form}, status=400)
    messages.success(request, f"Project {slug} created.")
    return redirect("projects-overview", slug=slug)


def project_overview(request: HttpRequest, slug: str) -> HttpResponse:
    from studio.accounts.access import project_for

    project, role = project_for(request.user, slug)
    return render(request, "projects/overview.html", {"project": project, "role": role})
