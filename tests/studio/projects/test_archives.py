"""Unsafe uploads, through the create view: each is refused with a clear message and
nothing is stored (no project row, no repository)."""

from __future__ import annotations

import io
import struct
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from studio.projects.models import Project

MAX_FILE, MAX_TOTAL, MAX_FILES = 2048, 8192, 5


@pytest.fixture(autouse=True)
def small_limits(settings: Any) -> None:
    settings.UPLOAD_MAX_FILE_BYTES = MAX_FILE
    settings.UPLOAD_MAX_BYTES = MAX_TOTAL
    settings.UPLOAD_MAX_FILES = MAX_FILES


def zip_of(*members: tuple[str, bytes], symlink: str | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            zf.writestr(name, data)
        if symlink:
            info = zipfile.ZipInfo(symlink)
            info.external_attr = 0o120777 << 16
            zf.writestr(info, "/etc/passwd")
    return buf.getvalue()


def tar_of(*members: tuple[str, bytes], link: tuple[str, bytes] | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        if link:
            info = tarfile.TarInfo(link[0])
            info.type = link[1]
            info.linkname = "/etc/passwd"
            tf.addfile(info)
    return buf.getvalue()


def lying_zip_bomb() -> bytes:
    """One member of 1 MB of 'a' (about 1 KB compressed) whose headers declare 100 bytes."""
    data = bytearray(zip_of(("pack/manifest.yaml", b"a" * 1_000_000)))
    struct.pack_into("<I", data, 22, 100)  # the local header's uncompressed size
    central = data.find(b"PK\x01\x02")
    struct.pack_into("<I", data, central + 24, 100)  # the central directory's
    return bytes(data)


OK = ("pack/manifest.yaml", b"name: x\nversion: 1\nentry: a\n")
UPLOADS: dict[str, tuple[str, Callable[[], bytes], str]] = {
    "zip_slip": ("p.zip", lambda: zip_of(OK, ("pack/../../evil.txt", b"x")), "would be written outside"),
    "zip_absolute_path": ("p.zip", lambda: zip_of(OK, ("/etc/evil.txt", b"x")), "would be written outside"),
    "tar_slip": ("p.tar.gz", lambda: tar_of(OK, ("../evil.txt", b"x")), "would be written outside"),
    "tar_absolute_path": ("p.tar.gz", lambda: tar_of(OK, ("/tmp/evil.txt", b"x")), "would be written outside"),
    "zip_symlink": ("p.zip", lambda: zip_of(OK, symlink="pack/link"), "links and special files are not allowed"),
    "tar_symlink": (
        "p.tar.gz",
        lambda: tar_of(OK, link=("pack/link", tarfile.SYMTYPE)),
        "links and special files are not allowed",
    ),
    "tar_hardlink": (
        "p.tar.gz",
        lambda: tar_of(OK, link=("pack/link", tarfile.LNKTYPE)),
        "links and special files are not allowed",
    ),
    "file_over_limit": (
        "p.zip",
        lambda: zip_of(OK, ("pack/big.txt", b"a" * (MAX_FILE + 1))),
        f"the limit per file is {MAX_FILE}",
    ),
    "too_many_files": (
        "p.zip",
        lambda: zip_of(*[(f"pack/{i}.txt", b"x") for i in range(MAX_FILES + 1)]),
        f"more than {MAX_FILES} files",
    ),
    "total_over_limit": (
        "p.tgz",
        lambda: tar_of(*[(f"pack/{i}.txt", b"a" * 2000) for i in range(MAX_FILES)]),
        f"unpacks to more than {MAX_TOTAL} bytes",
    ),
    "zip_bomb_with_a_lying_size": ("p.zip", lying_zip_bomb, "declared size does not match"),
    "zip_bomb_with_an_honest_size": (
        "p.zip",
        lambda: zip_of(("pack/a.txt", b"a" * 1_000_000)),
        f"the limit per file is {MAX_FILE}",
    ),
    "archive_over_limit": ("p.zip", lambda: b"PK" + bytes(range(256)) * 40, "the limit is"),
    "non_utf8_text": ("p.zip", lambda: zip_of(OK, ("pack/prompts/a.txt", "café".encode("latin-1"))), "not UTF-8 text"),
    "not_an_archive_by_name": ("pack.txt", lambda: b"hello", "upload a .zip or .tar.gz"),
    "not_a_zip": ("pack.zip", lambda: b"this is not a zip file", "not a valid zip file"),
    "not_a_tar_gz": ("pack.tar.gz", lambda: b"\x1f\x8b this is not gzip", "not a valid .tar.gz file"),
    "empty_archive": ("p.zip", lambda: zip_of(), "holds no files"),
    # fine under its top folder, a drive name once the folder is stripped (found by the fuzz test)
    "drive_name_at_the_root": ("p.zip", lambda: zip_of(("pack/a:b", b"x")), "the path is absolute"),
}


@pytest.mark.parametrize("case", sorted(UPLOADS))
def test_it_refuses_an_unsafe_upload_and_stores_nothing(case: str, as_owner: Client, git_root: Path) -> None:
    filename, build, message = UPLOADS[case]
    upload = SimpleUploadedFile(filename, build(), content_type="application/octet-stream")
    page = as_owner.post("/new", {"slug": "up", "archive": upload})
    assert page.status_code == 400
    html = page.content.decode()
    assert 'id="archive-error"' in html and "Nothing was stored" in html
    assert message.replace("'", "&#x27;") in html, html[html.find("archive-error") :][:400]
    assert not Project.objects.filter(slug="up").exists()
    assert not (git_root / "up.git").exists()


def test_it_accepts_a_safe_upload_within_the_limits(as_owner: Client, git_root: Path) -> None:
    upload = SimpleUploadedFile("p.tar.gz", tar_of(OK, ("pack/prompts/a.txt", "café {{ x }}".encode())))
    page = as_owner.post("/new", {"slug": "up", "archive": upload})
    assert page.status_code == 302
    assert (git_root / "up.git").is_dir()
