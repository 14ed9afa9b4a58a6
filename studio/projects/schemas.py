"""Request and response shapes of the projects API, in pairs (FooIn / FooOut).

Paths in files, diffs and problems are pack-relative (`graph.yaml`, `prompts/x.txt`):
the repository's `pack/` folder is the pack's root."""

from __future__ import annotations

from datetime import datetime

from ninja import Field, Schema

from studio.errors import ErrorOut

__all__ = ["ErrorOut"]  # re-exported: the one error shape lives in studio/errors.py


class ProjectIn(Schema):
    slug: str = Field(..., description="1-63 lowercase letters, digits, '-' or '_'; used in URLs and downloads")
    name: str = ""
    description: str = ""
    example: str = Field("", description="start from this example pack (e.g. support_triage); empty: an empty pack")


class ProjectOut(Schema):
    slug: str
    name: str
    description: str
    head: str = Field(..., description="the commit sha of the newest version")
    role: str = Field(..., description="your role on the project: author, reviewer or viewer")
    created_by: str
    created_at: datetime
    updated_at: datetime


class VersionOut(Schema):
    sha: str
    author: str
    email: str
    time: datetime
    message: str


class FileEntryOut(Schema):
    path: str
    size: int


class FileListOut(Schema):
    version: str = Field(..., description="the full sha the listing was read from")
    files: list[FileEntryOut]


class FileOut(Schema):
    path: str
    version: str
    size: int
    content: str


class FilesSaveIn(Schema):
    base: str = Field(..., description="the version (sha) these changes were made on; normally the head you read")
    message: str
    files: dict[str, str | None] = Field(..., description="pack-relative path -> new content, or null to delete")


class ChangeOut(Schema):
    path: str
    status: str = Field(..., description="added, modified or deleted")


class SaveOut(Schema):
    version: str = Field(..., description="the new version's sha")
    base: str
    changes: list[ChangeOut]


class StaleOut(Schema):
    detail: str
    head: str = Field(..., description="the version the project is at now; re-read it and save on top of it")
    changes: list[ChangeOut] = Field(..., description="what changed between your base and the head")


class DiffRowOut(Schema):
    old_line: int | None
    old: str
    new_line: int | None
    new: str
    kind: str = Field(..., description="same, del, add or change")


class DiffFileOut(Schema):
    path: str
    status: str
    unified: str | None = Field(default=None, description="a unified diff (layout=unified)")
    rows: list[DiffRowOut] | None = Field(default=None, description="side-by-side rows (layout=side-by-side)")


class DiffOut(Schema):
    a: str | None = Field(..., description="the older version's sha; null when b is the first version")
    b: str
    layout: str
    files: list[DiffFileOut]


class ValidateIn(Schema):
    version: str | None = Field(default=None, description="the version to validate (default: the head)")
    files: dict[str, str | None] = Field(
        default_factory=dict,
        description="pack-relative path -> content laid over the version (null removes a file), "
        "e.g. the editor's unsaved buffers",
    )


class ProblemOut(Schema):
    file: str
    line: int | None
    message: str


class SummaryOut(Schema):
    name: str | None = None
    pack_version: str | None = None
    entry: str | None = None
    nodes: int | None = None
    edges: int | None = None
    cases: int | None = None


class ValidateOut(Schema):
    valid: bool
    version: str
    problems: list[ProblemOut]
    summary: SummaryOut
