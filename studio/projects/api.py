"""The projects API routes (gathered into studio.api): projects, versions, files, diff,
validate and download. Every path a client names is pack-relative; the repository's
`pack/` folder is the pack root, and nothing outside it is reachable here.

Access: any member reads (validate included: it writes nothing); only authors save.
A stranger gets 404, so project names do not leak (studio.accounts.access)."""

from __future__ import annotations

import difflib
from datetime import UTC, datetime

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError
from django.http import HttpResponse
from django.utils import timezone
from dulwich.objects import Commit
from ninja import File, Form, Router, Status, UploadedFile
from ninja.errors import HttpError

from runtime import path_problem
from runtime import shown_path as shown
from studio.accounts.access import project_for, visible_projects
from studio.accounts.models import Membership, Role
from studio.errors import CONFLICT, ERRORS, INVALID, Conflict, NotFound, Refused
from studio.http import StudioRequest
from studio.projects.archives import ArchiveRefused, read_archive
from studio.projects.diff_rows import side_by_side
from studio.projects.forms import example_choices
from studio.projects.models import Project, create_project, slug_unavailable
from studio.projects.schemas import (
    ChangeOut,
    DiffFileOut,
    DiffOut,
    DiffRowOut,
    ErrorOut,
    FileEntryOut,
    FileListOut,
    FileOut,
    FilesSaveIn,
    ProblemOut,
    ProjectIn,
    ProjectOut,
    SaveOut,
    StaleOut,
    SummaryOut,
    ValidateIn,
    ValidateOut,
    VersionOut,
)
from studio.projects.specs import example_spec_files
from studio.projects.storage import FileChange, PackRepo, StaleBase, StorageError, UnsafePath
from studio.projects.validation import PACK_PREFIX, validate_files
from studio.projects.views import example_files, upload_limits

router = Router(tags=["projects"])

ARCHIVE_TYPES = {"zip": "application/zip", "tar.gz": "application/gzip"}
LAYOUTS = ("unified", "side-by-side")


# -- helpers -------------------------------------------------------------------------------


def _user(request: StudioRequest) -> User:
    return request.user  # signed in: the API's auth (studio.http.StudioRequest)


def _display(user: User) -> str:
    return user.get_full_name() or user.username


def _project_out(project: Project, role: Role, creators: dict[int, str] | None = None) -> ProjectOut:
    creator = (creators or {}).get(project.created_by_id) or project.created_by.username
    return ProjectOut(
        slug=project.slug,
        name=project.name,
        description=project.description,
        head=project.head,
        role=role.value,
        created_by=creator,
        created_at=project.created_at,
        updated_at=project.updated_at,
    )


def _repo(project: Project) -> PackRepo:
    try:
        return PackRepo(project.repo_path)
    except StorageError as exc:  # the row exists but its repository is gone: an operator's problem
        raise HttpError(500, f"the repository of {project.slug} is missing: {exc}") from None


def _resolve(repo: PackRepo, version: str | None) -> str:
    try:
        return repo.resolve(version or None)
    except StorageError as exc:
        raise NotFound(str(exc)) from None


def pack_path(path: str) -> str:
    """A pack-relative path, or 400: nothing may name a place outside the pack."""
    parts = path.split("/")
    if (
        not path
        or len(path) > 255
        or path.startswith("/")
        or "\\" in path
        or any(ord(c) < 32 for c in path)
        or any(p in ("", ".", "..") for p in parts)
    ):
        raise Refused(
            f"bad file path {path!r}: give a path inside the pack, like prompts/classify.txt "
            "(no '..', no leading '/', no empty parts)",
        )
    problem = path_problem(path, under=PACK_PREFIX)  # no .git, no name a filesystem cannot hold
    if problem is not None:
        raise Refused(f"bad file path {shown(path)}: {problem}")
    return path


def check_changes(files: dict[str, str | None]) -> dict[str, bytes | None]:
    limits = upload_limits()
    if len(files) > limits.max_files:
        raise Refused(f"{len(files)} files in one request; the limit is {limits.max_files}")
    out: dict[str, bytes | None] = {}
    for path, content in files.items():
        data = None if content is None else content.encode("utf-8")
        if data is not None and len(data) > limits.max_file:
            raise Refused(f"{path} is {len(data)} bytes; the limit per file is {limits.max_file}")
        out[pack_path(path)] = data
    return out


def changes_out(changes: list[FileChange]) -> list[ChangeOut]:
    """Repository paths made pack-relative; changes outside the pack (spec/) are left out."""
    return [
        ChangeOut(path=c.path.removeprefix(PACK_PREFIX), status=c.status)
        for c in changes
        if c.path.startswith(PACK_PREFIX)
    ]


def _text(data: bytes, path: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(f"{path} is not UTF-8 text", status=422) from None


def _parent(repo: PackRepo, sha: str) -> str | None:
    commit = repo.repo[sha.encode()]
    assert isinstance(commit, Commit)
    return commit.parents[0].decode() if commit.parents else None


def _unified(change: FileChange) -> str:
    old = f"a/{change.path}" if change.status != "added" else "/dev/null"
    new = f"b/{change.path}" if change.status != "deleted" else "/dev/null"
    lines = difflib.unified_diff(change.old.splitlines(), change.new.splitlines(), old, new, lineterm="")
    return "\n".join(lines) + "\n"


# -- projects ------------------------------------------------------------------------------


@router.get("", response={200: list[ProjectOut], **ERRORS}, summary="List the projects you can see")
def list_projects(request: StudioRequest) -> list[ProjectOut]:
    user = _user(request)
    projects = visible_projects(user)
    roles = dict(Membership.objects.filter(user=user, project__in=projects).values_list("project_id", "role"))
    creators = dict(User.objects.filter(pk__in={p.created_by_id for p in projects}).values_list("pk", "username"))
    return [_project_out(p, Role(roles.get(p.pk, Role.AUTHOR)), creators) for p in projects]


def _create(
    request: StudioRequest,
    slug: str,
    name: str,
    description: str,
    files: dict[str, bytes],
    message: str,
    spec: dict[str, bytes] | None = None,
) -> Project:
    if Project.objects.filter(slug=slug).exists():
        raise Conflict(slug_unavailable(slug, request.user))
    try:
        return create_project(
            slug=slug,
            name=name or slug,
            owner=_user(request),
            pack_files=files,
            spec_files=spec,
            message=message,
            description=description,
        )
    except ValidationError as exc:
        fields = getattr(exc, "message_dict", None)
        detail = "; ".join(f"{k}: {' '.join(v)}" for k, v in fields.items()) if fields else "; ".join(exc.messages)
        raise Refused(detail) from None
    except UnsafePath as exc:
        raise Refused(f"upload refused: {exc}. Nothing was stored.") from None
    except (IntegrityError, StorageError):  # another create of this slug won, or a repository holds it
        raise Conflict(slug_unavailable(slug, request.user)) from None


@router.post(
    "",
    response={201: ProjectOut, **ERRORS, **CONFLICT, **INVALID},
    summary="Create a project: empty, or from an example pack",
)
def create(request: StudioRequest, body: ProjectIn) -> Status[ProjectOut]:
    files: dict[str, bytes] = {}
    spec: dict[str, bytes] = {}
    message = "Create empty project"
    if body.example:
        examples = [name for name, _ in example_choices() if name]
        if body.example not in examples:
            raise Refused(f"no example {body.example!r}; choose one of {', '.join(examples)}")
        files, message = example_files(body.example), f"Create from example {body.example}"
        spec = example_spec_files(body.example)
    project = _create(request, body.slug, body.name, body.description, files, message, spec)
    return Status(201, _project_out(project, Role.AUTHOR))


@router.post(
    "/upload",
    response={201: ProjectOut, **ERRORS, **CONFLICT, **INVALID},
    summary="Create a project from an uploaded pack (.zip or .tar.gz)",
)
def upload(
    request: StudioRequest,
    slug: Form[str],
    archive: File[UploadedFile],
    name: Form[str] = "",
    description: Form[str] = "",
) -> Status[ProjectOut]:
    """Refused archives (paths outside the folder, links, files over the size limit, too
    many files, non-UTF-8 text) answer 400 with the reason; nothing is stored."""
    limits = upload_limits()
    if archive.size is not None and archive.size > limits.max_total:
        raise Refused(
            f"upload refused: the archive is {archive.size} bytes; the limit is {limits.max_total}. "
            "Nothing was stored.",
        )
    try:
        files = read_archive(archive.name or "", archive.read(), limits)
    except ArchiveRefused as exc:
        raise Refused(f"upload refused: {exc}. Nothing was stored.") from None
    project = _create(request, slug, name, description, files, f"Create from upload {archive.name}")
    return Status(201, _project_out(project, Role.AUTHOR))


@router.get("/{slug}", response={200: ProjectOut, **ERRORS}, summary="One project")
def detail(request: StudioRequest, slug: str) -> ProjectOut:
    project, role = project_for(request.user, slug)
    return _project_out(project, role)


# -- versions and files ----------------------------------------------------------------------


@router.get(
    "/{slug}/versions",
    response={200: list[VersionOut], **ERRORS, **INVALID},
    summary="History: the commits on the project, newest first",
)
def versions(request: StudioRequest, slug: str, limit: int = 200) -> list[VersionOut]:
    project, _ = project_for(request.user, slug)
    if not 1 <= limit <= 10_000:
        raise Refused("limit must be between 1 and 10000")
    out = []
    for v in _repo(project).log(limit=limit):
        author, _, email = v.author.partition(" <")
        out.append(
            VersionOut(
                sha=v.sha,
                author=author,
                email=email.rstrip(">"),
                message=v.message,
                time=datetime.fromtimestamp(v.time, tz=UTC),
            )
        )
    return out


@router.get("/{slug}/files", response={200: FileListOut, **ERRORS}, summary="The pack's files at a version")
def list_files(request: StudioRequest, slug: str, version: str | None = None) -> FileListOut:
    project, _ = project_for(request.user, slug)
    repo = _repo(project)
    sha = _resolve(repo, version)
    files = repo.files(sha, prefix=PACK_PREFIX)
    return FileListOut(version=sha, files=[FileEntryOut(path=p, size=len(d)) for p, d in sorted(files.items())])


@router.get(
    "/{slug}/files/{path:path}",
    response={200: FileOut, **ERRORS, 422: ErrorOut},
    summary="One file's content at a version",
)
def read_file(request: StudioRequest, slug: str, path: str, version: str | None = None) -> FileOut:
    project, _ = project_for(request.user, slug)
    pack_path(path)
    repo = _repo(project)
    sha = _resolve(repo, version)
    files = repo.files(sha, prefix=PACK_PREFIX)
    if path not in files:
        raise NotFound(f"no file {path} in version {sha[:10]}")
    return FileOut(path=path, version=sha, size=len(files[path]), content=_text(files[path], path))


@router.put(
    "/{slug}/files",
    response={200: SaveOut, **ERRORS, 409: StaleOut, **INVALID},
    summary="Save changed files as a new version",
)
def save_files(request: StudioRequest, slug: str, body: FilesSaveIn) -> SaveOut | Status[StaleOut]:
    """Refused with 409 (and nothing written) when the project moved past `base`; the
    answer names the head and the files changed since, so the client can merge by hand."""
    project, _ = project_for(request.user, slug, edit=True)
    if not body.files:
        raise Refused("no files given; send {path: content} (or null to delete)")
    if not body.message.strip():
        raise Refused("a save needs a message")
    changes = check_changes(body.files)
    repo = _repo(project)
    try:
        base = repo.resolve(body.base)
    except StorageError as exc:
        raise Refused(f"base: {exc}") from None
    existing = repo.files(base, prefix=PACK_PREFIX)
    for path, data in changes.items():
        if data is None and path not in existing:
            raise Refused(f"cannot delete {path}: version {base[:10]} has no such file")
    user = _user(request)
    try:
        sha = repo.save(
            {PACK_PREFIX + p: d for p, d in changes.items()},
            base=base,
            author=_display(user),
            email=user.email,
            message=body.message,
        )
    except StaleBase as exc:
        detail = f"{exc}; nothing was saved. Re-read the files at {exc.head[:10]} and save again"
        return Status(409, StaleOut(detail=detail, head=exc.head, changes=changes_out(exc.changes)))
    Project.objects.filter(pk=project.pk).update(head=sha, updated_at=timezone.now())
    return SaveOut(version=sha, base=base, changes=changes_out(repo.diff(base, sha)))


# -- diff, validate, download ------------------------------------------------------------------


@router.get("/{slug}/diff", response={200: DiffOut, **ERRORS}, summary="What changed between two versions")
def diff(
    request: StudioRequest, slug: str, a: str | None = None, b: str | None = None, layout: str = "unified"
) -> DiffOut:
    """`b` defaults to the head and `a` to b's parent. `layout=unified` gives each file a
    unified diff; `layout=side-by-side` gives rows (old line, old text, new line, new text, kind)."""
    project, _ = project_for(request.user, slug)
    if layout not in LAYOUTS:
        raise Refused(f"unknown layout {layout!r}; use unified or side-by-side")
    repo = _repo(project)
    new = _resolve(repo, b)
    old = _resolve(repo, a) if a else _parent(repo, new)
    if old is None:  # the first version: everything was added
        changes = [
            FileChange(
                p,
                "added",
                "",
                d.decode("utf-8", errors="replace"),
                side_by_side("", d.decode("utf-8", errors="replace")),
            )
            for p, d in sorted(repo.files(new, prefix=PACK_PREFIX).items())
        ]
    else:
        changes = repo.diff(old, new, prefix=PACK_PREFIX)
    files = []
    for change in changes:
        if layout == "unified":
            files.append(DiffFileOut(path=change.path, status=change.status, unified=_unified(change)))
        else:
            rows = [DiffRowOut(old_line=r[0], old=r[1], new_line=r[2], new=r[3], kind=r[4]) for r in change.rows]
            files.append(DiffFileOut(path=change.path, status=change.status, rows=rows))
    return DiffOut(a=old, b=new, layout=layout, files=files)


@router.post(
    "/{slug}/validate",
    response={200: ValidateOut, **ERRORS, **INVALID},
    summary="Load a version (with unsaved files laid over it) and report every problem",
)
def validate(request: StudioRequest, slug: str, body: ValidateIn) -> ValidateOut:
    project, _ = project_for(request.user, slug)
    overlay = check_changes(body.files)
    repo = _repo(project)
    sha = _resolve(repo, body.version)
    files = repo.files(sha, prefix=PACK_PREFIX)
    for path, data in overlay.items():
        if data is None:
            files.pop(path, None)
        else:
            files[path] = data
    # Tools are checked against the manifest only: the studio does not know the host's registry.
    pack, found = validate_files(files)
    if pack is None or found:  # found with a pack: it loads, but the studio refuses part of it
        problems = [ProblemOut(file=p.file, line=p.line, message=p.message) for p in found]
        return ValidateOut(valid=False, version=sha, problems=problems, summary=SummaryOut())
    summary = SummaryOut(
        name=pack.name,
        pack_version=str(pack.version),
        entry=pack.entry,
        nodes=len(pack.nodes),
        edges=len(pack.edges),
        cases=len(pack.cases),
    )
    return ValidateOut(valid=True, version=sha, problems=[], summary=summary)


_ARCHIVE_DOC = {
    "responses": {
        200: {
            "description": "the archive (Content-Disposition: attachment)",
            "content": {kind: {"schema": {"type": "string", "format": "binary"}} for kind in ARCHIVE_TYPES.values()},
        }
    }
}


@router.get(
    "/{slug}/download",
    response={**ERRORS, 409: ErrorOut},
    openapi_extra=_ARCHIVE_DOC,
    summary="A version of the pack as a .zip or .tar.gz (one folder named after the project)",
)
def download(request: StudioRequest, slug: str, version: str | None = None, format: str = "zip") -> HttpResponse:
    project, _ = project_for(request.user, slug)
    if format not in ARCHIVE_TYPES:
        raise Refused(f"unknown format {format!r}; use zip or tar.gz")
    repo = _repo(project)
    sha = _resolve(repo, version)
    try:
        data = repo.archive(sha, format, prefix=PACK_PREFIX, folder=project.slug)
    except UnsafePath as exc:  # stored before such paths were refused: hand out nothing
        raise Conflict(str(exc)) from None
    response = HttpResponse(data, content_type=ARCHIVE_TYPES[format])
    response["Content-Disposition"] = f'attachment; filename="{project.slug}-{sha[:10]}.{format}"'
    response["X-Packforge-Version"] = sha
    return response
