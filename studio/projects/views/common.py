"""What every project page needs: the project, the user's role, its repository, and
the bookkeeping after a save."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django_htmx.http import HttpResponseClientRedirect

from studio.accounts.access import project_for
from studio.accounts.models import Role
from studio.http import StudioRequest
from studio.packs import PackUnrunnable
from studio.projects.models import Project
from studio.projects.specs import SPEC_PREFIX
from studio.projects.storage import FileChange, PackRepo, StorageError, Version
from studio.projects.validation import PACK_PREFIX, Problem, validate_files

SECTION = "project-page"  # the DOM id of projects/base.html's section
FRAGMENT_FRAME = "_fragment.html"  # what a section base extends for an htmx swap: no site header


@dataclass
class Opened:
    project: Project
    role: Role
    repo: PackRepo

    @property
    def can_edit(self) -> bool:
        return self.role.can_edit

    def context(self, active: str, **extra: object) -> dict[str, object]:
        return {
            "project": self.project,
            "role": self.role,
            "can_edit": self.can_edit,
            "active": active,
            "head_problem": self.head_problem,  # called by the template only where it is shown
            **extra,
        }

    def head_problem(self) -> str:
        """Why the pack at the head cannot be tried or evaluated ("" when it loads): the
        project's Try it and Run an eval buttons are disabled with this reason."""
        return head_problem(self.project.repo_path, self.repo.head() or "")


@functools.lru_cache(maxsize=256)
def head_problem(repo_path: Path, head: str) -> str:
    """Cached by commit: a commit's files never change."""
    if not head:
        return "the project has no pack yet"
    try:
        problems = problems_at(PackRepo(repo_path), head)
    except (PackUnrunnable, StorageError) as exc:  # a stored version unsafe to write out, say
        return f"the pack cannot be read: {exc}"
    if not problems:
        return ""
    first = problems[0]
    where = f"{first.file}:{first.line}" if first.line else first.file
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"the pack does not load: {where}: {first.message}{more}"


def open_project(request: StudioRequest, slug: str, *, edit: bool = False) -> Opened:
    """Stranger: 404. Member without the right role on an edit: 403."""
    project, role = project_for(request.user, slug, edit=edit)
    try:
        repo = PackRepo(project.repo_path)
    except StorageError:
        raise Http404("this project's repository is missing") from None
    return Opened(project, role, repo)


def page(
    request: StudioRequest, template: str, context: dict[str, object], status: int = 200, fragment: str = "project-page"
) -> HttpResponse:
    """The full page, or for an htmx request the fragment named after the DOM id it
    replaces: `project-page` (the default: the section, everything below the site
    header, which projects/base.html frames without the header) or a partial of the page."""
    if not request.htmx:
        return render(request, template, context, status=status)
    if fragment == SECTION:
        return render(request, template, {**context, "frame": FRAGMENT_FRAME}, status=status)
    return render(request, f"{template}#{fragment}", context, status=status)


def committer(user: object) -> tuple[str, str]:
    full = getattr(user, "get_full_name", lambda: "")()
    return str(full or getattr(user, "username", "unknown")), str(getattr(user, "email", "") or "")


def record_save(opened: Opened) -> None:
    """Point the project's row at the repository's head after a save.

    The head is re-read from the repository rather than taken from this save, so two
    requests that save at once cannot leave the row pointing at the older commit."""
    head = opened.repo.head() or ""
    Project.objects.filter(pk=opened.project.pk).update(head=head, updated_at=timezone.now())
    opened.project.head = head


def report_saved(request: StudioRequest, opened: Opened, sha: str, message: str) -> None:
    messages.success(request, f"Saved {sha[:10]}: {message.strip().splitlines()[0]}")
    problems = problems_at(opened.repo, sha)
    if problems:
        messages.warning(
            request,
            f"The pack has {len(problems)} problem{'s' if len(problems) != 1 else ''} and "
            "does not load yet. It was saved anyway, so work in progress is never lost.",
        )


def after_save(request: StudioRequest, url: str) -> HttpResponse:
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def pack_files(repo: PackRepo, version: str | None = None) -> dict[str, bytes]:
    return repo.files(version, prefix=PACK_PREFIX)


def problems_at(repo: PackRepo, version: str | None = None) -> list[Problem]:
    return validate_files(pack_files(repo, version))[1]


SHORT = 10  # characters of a sha shown in pages and download names


@dataclass
class Commit:
    sha: str
    author: str
    email: str
    when: datetime
    message: str
    parent: str = ""  # the previous commit on the (linear) branch, set by the history page

    @property
    def short(self) -> str:
        return self.sha[:SHORT]

    @property
    def subject(self) -> str:
        return self.message.splitlines()[0] if self.message else ""


def commit_of(version: Version) -> Commit:
    name, _, email = version.author.partition(" <")
    return Commit(version.sha, name, email.rstrip(">"), datetime.fromtimestamp(version.time, tz=UTC), version.message)


def commit_at(repo: PackRepo, sha: str) -> Commit:
    """The commit `sha` (already resolved), read directly rather than by walking the log."""
    from dulwich.objects import Commit as GitCommit

    raw = repo.repo[sha.encode()]
    assert isinstance(raw, GitCommit)
    return commit_of(
        Version(
            sha,
            raw.author.decode(errors="replace"),
            float(raw.commit_time),
            raw.message.decode(errors="replace").strip(),
        )
    )


def head_commit(repo: PackRepo) -> Commit | None:
    log = repo.log(limit=1)
    return commit_of(log[0]) if log else None


def text_of(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def form_text(value: str) -> bytes:
    """Browsers send textarea text with CRLF line ends; the repository keeps LF."""
    return value.replace("\r\n", "\n").replace("\r", "\n").encode("utf-8")


Row = tuple[int | None, str, int | None, str, str]


def fold(rows: list[Row], context: int = 3) -> list[Row]:
    """Side-by-side rows with long unchanged stretches folded into one `gap` row that
    says how many lines it hides, keeping `context` lines around each change."""
    keep = [False] * len(rows)
    for i, row in enumerate(rows):
        if row[4] != "same":
            for j in range(max(0, i - context), min(len(rows), i + context + 1)):
                keep[j] = True
    out: list[Row] = []
    i = 0
    while i < len(rows):
        if keep[i]:
            out.append(rows[i])
            i += 1
            continue
        j = i
        while j < len(rows) and not keep[j]:
            j += 1
        if j - i <= 2:  # folding one or two lines saves nothing
            out.extend(rows[i:j])
        else:
            out.append((None, f"{j - i} unchanged lines", None, f"{j - i} unchanged lines", "gap"))
        i = j
    return out


@dataclass
class ShownChange(FileChange):
    """A change as the pages name it: `path` relative to its area (the pack's files
    pack-relative, as the API gives them; the spec's relative to spec/), `area` which."""

    area: str = "pack"


def changed_files(changes: list[FileChange]) -> list[ShownChange]:
    """The changes worth showing (not the empty project's placeholder), folded, with
    repository paths made relative: the pack's first, then the spec's."""
    out = []
    for change in changes:
        if change.path == f"{PACK_PREFIX}.keep":
            continue
        area, path = "", change.path
        for name, prefix in (("pack", PACK_PREFIX), ("spec", SPEC_PREFIX)):
            if change.path.startswith(prefix):
                area, path = name, change.path.removeprefix(prefix)
        out.append(ShownChange(path, change.status, change.old, change.new, fold(change.rows), area=area))
    return sorted(out, key=lambda c: (c.area != "pack", c.area, c.path))
