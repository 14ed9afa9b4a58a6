"""Reading uploaded pack archives (.zip, .tar.gz) safely.

Refused, with nothing stored: members that would land outside the folder (absolute
paths, '..'), links and device files, files over the size limit, too many files, a
total over the limit, text that is not UTF-8, a name given twice (or as both a file and
a folder), and every name `runtime.paths` refuses: `.git` and the other names git reads,
in any spelling a filesystem maps to them, names that are not UTF-8, names over 255
bytes, paths over 1024 bytes or 32 folders deep."""

from __future__ import annotations

import io
import tarfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import PurePosixPath

from runtime import path_problem
from runtime import shown_path as shown
from studio.errors import Refused


class ArchiveRefused(Refused):
    """An uploaded archive the studio will not unpack; the message names the member and why."""


@dataclass(frozen=True)
class Limits:
    max_total: int
    max_file: int
    max_files: int


def _clean(name: str) -> str | None:
    """The member's normalised relative path, None for the archive's root folder (`./`),
    or ArchiveRefused. The top folder is checked too: it is stripped only later."""
    if "\\" in name or "\0" in name:
        raise ArchiveRefused(f"{name!r}: backslashes and NUL bytes are not allowed in names")
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        raise ArchiveRefused(f"{name!r} would be written outside the pack folder")
    if not path.parts:
        return None
    clean = str(path)
    problem = path_problem(clean, under="pack/")
    if problem is not None:
        raise ArchiveRefused(f"{shown(clean)}: {problem}")
    return clean


def _add(files: dict[str, bytes], name: str, content: bytes) -> None:
    if name in files:
        raise ArchiveRefused(f"{name} appears twice in the archive; each file may appear once")
    files[name] = content


def _check_folders(files: dict[str, bytes]) -> None:
    for name in files:
        parts = name.split("/")
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in files:
                raise ArchiveRefused(f"{'/'.join(parts[:i])} is both a file and a folder in the archive")


def read_archive(filename: str, data: bytes, limits: Limits) -> dict[str, bytes]:
    """Return {relative path: bytes}, with a single common top folder stripped."""
    if len(data) > limits.max_total:
        raise ArchiveRefused(f"the archive is {len(data)} bytes; the limit is {limits.max_total}")
    lowered = filename.lower()
    if lowered.endswith(".zip"):
        files = _read_zip(data, limits)
    elif lowered.endswith((".tar.gz", ".tgz")):
        files = _read_tar(data, limits)
    else:
        raise ArchiveRefused(f"{filename!r}: upload a .zip or .tar.gz")
    if not files:
        raise ArchiveRefused("the archive holds no files")
    _check_folders(files)
    for name, content in files.items():
        try:
            content.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ArchiveRefused(f"{name}: not UTF-8 text (byte {exc.start}); packs hold text files only") from None
    tops = {name.split("/", 1)[0] for name in files}
    if len(tops) == 1 and all("/" in name for name in files):
        top = tops.pop() + "/"
        files = {name[len(top) :]: content for name, content in files.items()}
        for name in files:  # a name fine under its folder may not be at the root ("x/a:b" -> "a:b")
            problem = path_problem(name, under="pack/")
            if problem is not None:
                raise ArchiveRefused(f"{shown(name)}: {problem}")
    return files


def _check_counts(count: int, size: int, total: int, name: str, limits: Limits) -> None:
    if count > limits.max_files:
        raise ArchiveRefused(f"the archive holds more than {limits.max_files} files")
    if size > limits.max_file:
        raise ArchiveRefused(f"{name} is {size} bytes; the limit per file is {limits.max_file}")
    if total > limits.max_total:
        raise ArchiveRefused(f"the archive unpacks to more than {limits.max_total} bytes")


def _read_zip(data: bytes, limits: Limits) -> dict[str, bytes]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, NotImplementedError, UnicodeDecodeError, ValueError, EOFError, OSError):
        # a damaged central directory fails in more ways than BadZipFile: a name flagged
        # UTF-8 that is not, a "version needed" zipfile does not know, a bad offset
        raise ArchiveRefused("not a valid zip file") from None
    files: dict[str, bytes] = {}
    total = 0
    with archive:
        for info in archive.infolist():
            name = _clean(info.filename)
            if info.is_dir() or name is None:
                continue
            mode = info.external_attr >> 16
            if mode and (mode & 0o170000) not in (0, 0o100000):
                raise ArchiveRefused(f"{name}: links and special files are not allowed")
            total += info.file_size
            _check_counts(len(files) + 1, info.file_size, total, name, limits)
            try:
                with archive.open(info) as member:
                    content = member.read(limits.max_file + 1)  # do not trust the declared size
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError, RuntimeError, NotImplementedError, ValueError):
                # zipfile stops at the declared size, so a member whose real size is larger
                # (a zip bomb that lies) fails its CRC here; so do damaged and encrypted ones.
                raise ArchiveRefused(
                    f"{name}: damaged, encrypted, or its declared size does not match its contents"
                ) from None
            total += len(content) - info.file_size
            _check_counts(len(files) + 1, len(content), total, name, limits)
            _add(files, name, content)
    return files


def _read_tar(data: bytes, limits: Limits) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            for member in archive:
                name = _clean(member.name)
                if member.isdir() or name is None:
                    continue
                if not member.isfile():
                    raise ArchiveRefused(f"{name}: links and special files are not allowed")
                total += member.size
                _check_counts(len(files) + 1, member.size, total, name, limits)
                extracted = archive.extractfile(member)
                if extracted is None:
                    raise ArchiveRefused(f"{name}: cannot be read")
                _add(files, name, extracted.read(limits.max_file + 1))
    except (tarfile.TarError, EOFError, OSError, zlib.error):
        raise ArchiveRefused("not a valid .tar.gz file") from None
    return files
