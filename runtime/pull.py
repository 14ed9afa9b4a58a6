"""`packforge pull`: download one version of a pack from a studio, and unpack it safely.

The studio answers `GET {studio}/api/projects/{project}/download?format=tar.gz` with an
archive of one folder. This module talks to it over httpx with a bearer token and
unpacks the archive itself, refusing anything that could land outside the target
folder (absolute names, `..`, links, devices), archives over a size limit, a name given
twice, and every name `runtime.paths` refuses: a `.git` folder or another file git reads
(in any spelling a filesystem maps to one), so a pulled pack never runs code through
git on the machine that pulled it; names that are not UTF-8 or too long to write. The
archive is unpacked into a sibling staging folder and moved into place only when all
of it was read, so a refused or broken download leaves nothing behind.

It imports nothing from the studio: a machine that runs packs needs only the runtime."""

from __future__ import annotations

import io
import os
import re
import shutil
import stat
import tarfile
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from urllib.parse import urlsplit

import httpx

from runtime.errors import PackforgeError
from runtime.paths import path_problem, shown

__all__ = ["FORMATS", "Limits", "PullError", "Pulled", "Target", "parse_target", "pull", "read_archive"]

FORMATS = ("tar.gz", "zip")
TOKEN_ENV = "PACKFORGE_TOKEN"
SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
TOKEN_CHARS = re.compile(r"^[\x21-\x7e]{1,200}$")  # printable ASCII, no spaces


class PullError(PackforgeError):
    """The pull could not be done; the message is one line and never holds the token."""


@dataclass(frozen=True)
class Limits:
    """Bounds on what a download may unpack to (a pack is a few dozen small text files)."""

    max_download: int = 256 * 1024 * 1024
    max_total: int = 512 * 1024 * 1024
    max_files: int = 10_000


@dataclass(frozen=True)
class Target:
    studio: str  # base URL of the studio, without a trailing slash
    project: str

    @property
    def download_url(self) -> str:
        return f"{self.studio}/api/projects/{self.project}/download"


@dataclass(frozen=True)
class Pulled:
    project: str
    version: str
    folder: Path
    files: int

    def summary(self) -> str:
        return (
            f"pulled {self.project} @ {self.version[:10] or 'head'} into {self.folder} ({self.files} files); "
            f"next: packforge validate {self.folder}"
        )


def parse_target(url: str) -> Target:
    """Split STUDIO_URL/PROJECT. Also accepted: the project's page (`.../p/PROJECT/`)
    and its API address (`.../api/projects/PROJECT`)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PullError(f"{url!r} is not a studio address; give STUDIO_URL/PROJECT, e.g. http://localhost:8000/triage")
    if parts.username or parts.password:
        raise PullError("put the token in --token or $PACKFORGE_TOKEN, not in the URL")
    if parts.query or parts.fragment:
        raise PullError(f"{url!r}: give STUDIO_URL/PROJECT without '?' or '#'")
    segments = [s for s in parts.path.split("/") if s]
    if not segments:
        raise PullError(f"{url!r} names no project; give STUDIO_URL/PROJECT, e.g. {url.rstrip('/')}/triage")
    project = segments.pop()
    if segments[-2:] == ["api", "projects"]:
        del segments[-2:]
    elif segments[-1:] == ["p"]:
        segments.pop()
    if not SLUG.match(project):
        raise PullError(f"{project!r} is not a project name (lowercase letters, digits, '-' or '_')")
    base = f"{parts.scheme}://{parts.netloc}" + "".join(f"/{s}" for s in segments)
    return Target(base, project)


def _token(explicit: str | None) -> str:
    token = (explicit if explicit is not None else os.environ.get(TOKEN_ENV, "")).strip()
    if not token:
        raise PullError(f"no token: pass --token TOKEN or set {TOKEN_ENV} (make one in the studio: POST /api/tokens)")
    if not TOKEN_CHARS.match(token):
        raise PullError("the token holds characters a studio token cannot have; copy it again")
    return token


def _detail(response: httpx.Response) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    detail = body.get("detail") if isinstance(body, dict) else None
    return " ".join(str(detail).split()) if detail is not None else None


def _refusal(response: httpx.Response, target: Target) -> PullError:
    detail = _detail(response)
    code = response.status_code
    if detail is None:
        return PullError(
            f"{target.download_url} answered {code} {response.reason_phrase}, not a studio's answer; "
            f"is {target.studio} the studio's address?"
        )
    if code == 401:
        return PullError(
            f"the studio at {target.studio} refused the token ({detail}); make a new one "
            f"(POST /api/tokens) and pass it with --token or {TOKEN_ENV}"
        )
    if code == 404 and detail.lower() == "not found":
        return PullError(f"no project '{target.project}' at {target.studio}, or you are not a member of it")
    return PullError(f"the studio answered {code}: {detail}")


def _download(
    target: Target,
    token: str,
    version: str | None,
    fmt: str,
    limits: Limits,
    transport: httpx.BaseTransport | None,
    timeout: float,
) -> tuple[bytes, str]:
    params = {"format": fmt, **({"version": version} if version else {})}
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/gzip, application/zip, application/json"}
    try:
        # httpx drops the Authorization header on a redirect to another host.
        with (
            httpx.Client(transport=transport, timeout=timeout, follow_redirects=True) as client,
            client.stream("GET", target.download_url, params=params, headers=headers) as response,
        ):
            if response.status_code != 200:
                response.read()
                raise _refusal(response, target)
            if response.headers.get("content-type", "").startswith("text/html"):
                raise PullError(
                    f"{target.download_url} answered with a web page, not an archive; "
                    f"is {target.studio} the studio's address?"
                )
            chunks, size = [], 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > limits.max_download:
                    raise PullError(f"the download is over {limits.max_download} bytes; refusing it")
                chunks.append(chunk)
            return b"".join(chunks), response.headers.get("x-packforge-version", version or "")
    except httpx.TimeoutException:
        raise PullError(f"the studio at {target.studio} did not answer within {timeout:g}s") from None
    except httpx.ConnectError as exc:
        raise PullError(_redact(f"cannot reach the studio at {target.studio}: {exc}", token)) from None
    except httpx.HTTPError as exc:
        raise PullError(_redact(f"talking to the studio at {target.studio} failed: {exc}", token)) from None


def _redact(message: str, token: str) -> str:
    return " ".join(message.replace(token, "***").split())


# -- safe unpacking ------------------------------------------------------------------------------


def _member_name(name: str) -> PurePosixPath | None:
    """The member's relative path, None for the archive's root, or PullError."""
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        raise PullError(f"the archive holds {name!r}, which would be written outside the folder; refusing it")
    if "\\" in name or "\0" in name or PureWindowsPath(name).drive:
        raise PullError(f"the archive holds {name!r}, a name that is not a plain relative path; refusing it")
    if not path.parts:
        return None
    problem = path_problem(str(path))  # folders too: an empty `.git/` is refused as well
    if problem is not None:
        raise PullError(f"the archive holds {shown(name)}: {problem}; refusing it")
    return path


def _read_tar(data: bytes, limits: Limits) -> dict[PurePosixPath, bytes]:
    files: dict[PurePosixPath, bytes] = {}
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
            for member in archive:
                path = _member_name(member.name)
                if member.isdir() or path is None:
                    continue
                if not member.isfile():
                    raise PullError(f"the archive holds {member.name!r}, a link or special file; refusing it")
                total += member.size
                _check(path, files, total, limits)
                extracted = archive.extractfile(member)
                if extracted is None:
                    raise PullError(f"cannot read {member.name!r} from the archive")
                files[path] = extracted.read()
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        raise PullError(f"the download is not a readable .tar.gz ({type(exc).__name__})") from None
    return files


def _read_zip(data: bytes, limits: Limits) -> dict[PurePosixPath, bytes]:
    files: dict[PurePosixPath, bytes] = {}
    total = 0
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for info in archive.infolist():
                path = _member_name(info.filename)
                if info.is_dir() or path is None:
                    continue
                mode = info.external_attr >> 16
                if stat.S_IFMT(mode) not in (0, stat.S_IFREG):  # 0: no type recorded (a plain file)
                    raise PullError(f"the archive holds {info.filename!r}, a link or special file; refusing it")
                total += info.file_size
                _check(path, files, total, limits)
                with archive.open(info) as member:
                    content = member.read(limits.max_total + 1)  # do not trust the declared size
                total += len(content) - info.file_size
                _check(path, files, total, limits)
                files[path] = content
    except (zipfile.BadZipFile, EOFError, OSError, zlib.error, NotImplementedError, RuntimeError, ValueError) as exc:
        # RuntimeError: an encrypted member; NotImplementedError: an unknown compression;
        # ValueError (UnicodeDecodeError included): a damaged name or offset
        raise PullError(f"the download is not a readable .zip ({type(exc).__name__})") from None
    return files


def _check(path: PurePosixPath, files: dict[PurePosixPath, bytes], total: int, limits: Limits) -> None:
    if path in files:
        raise PullError(f"the archive holds {str(path)!r} twice; refusing it")
    if len(files) + 1 > limits.max_files:
        raise PullError(f"the archive holds more than {limits.max_files} files; refusing it")
    if total > limits.max_total:
        raise PullError(f"the archive unpacks to more than {limits.max_total} bytes; refusing it")


def read_archive(data: bytes, fmt: str, limits: Limits = Limits()) -> dict[PurePosixPath, bytes]:
    """{relative path: bytes} of a .tar.gz or .zip, with its one top folder stripped.

    Raises PullError for anything that could land outside the folder it is unpacked
    into (absolute names, '..', links, special files) and for archives over `limits`."""
    files = _read_zip(data, limits) if fmt == "zip" else _read_tar(data, limits)
    if not files:
        raise PullError("the archive holds no files")
    tops = {p.parts[0] for p in files}
    if len(tops) == 1 and all(len(p.parts) > 1 for p in files):
        files = {PurePosixPath(*p.parts[1:]): d for p, d in files.items()}
    return files


def _write(files: dict[PurePosixPath, bytes], root: Path) -> None:
    base = root.resolve()
    for path, data in sorted(files.items()):
        target = base.joinpath(*path.parts)
        if not target.resolve().is_relative_to(base):  # defence in depth; names were checked on read
            raise PullError(f"{str(path)!r} would be written outside {root}; refusing it")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        except OSError as exc:
            raise PullError(f"cannot write {path}: {exc.strerror}") from None


def _check_destination(dest: Path, force: bool) -> bool:
    """True when `dest` holds files that a --force pull will replace."""
    if dest.exists() and not dest.is_dir():
        raise PullError(f"{dest} exists and is not a folder; choose another --out")
    if not dest.exists() or not any(dest.iterdir()):
        return False
    if not force:
        raise PullError(f"{dest} is not empty; pass --force to replace its contents, or choose another --out")
    here, resolved = Path.cwd().resolve(), dest.resolve()
    if resolved == Path(resolved.anchor) or resolved == Path.home().resolve() or here.is_relative_to(resolved):
        raise PullError(f"refusing to replace {dest}: it is the current folder, one above it, your home or a root")
    return True


def _install(files: dict[PurePosixPath, bytes], dest: Path, replace: bool) -> None:
    """Unpack into a staging folder, then move it into place: beside `dest` when `dest`
    is new or replaced, inside it when it is an existing empty folder (which may be the
    current folder, so it is filled, not swapped)."""
    dest = dest.absolute()
    fill = dest.is_dir() and not replace
    home = dest if fill else dest.parent
    try:
        home.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.pull-", dir=home))
    except OSError as exc:
        raise PullError(f"cannot write to {home}: {exc.strerror}") from None
    try:
        _write(files, staging)
        if fill:
            for entry in sorted(staging.iterdir()):
                entry.rename(dest / entry.name)
            staging.rmdir()
        elif replace:
            staging.chmod(0o755)
            old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=home))
            dest.rename(old / "replaced")
            try:
                staging.rename(dest)
            except OSError:
                (old / "replaced").rename(dest)  # put the old contents back
                old.rmdir()
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            staging.chmod(0o755)
            staging.rename(dest)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise PullError(f"cannot move the pack into {dest}: {exc.strerror}") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def pull(
    url: str,
    *,
    token: str | None = None,
    version: str | None = None,
    out: str | Path | None = None,
    force: bool = False,
    fmt: str = "tar.gz",
    limits: Limits = Limits(),
    transport: httpx.BaseTransport | None = None,
    timeout: float = 60.0,
) -> Pulled:
    """Download `version` (default: the head) of the project at STUDIO_URL/PROJECT into
    `out` (default: ./PROJECT). `token` defaults to $PACKFORGE_TOKEN.

    Refuses to write into a non-empty folder unless `force`, which replaces its contents.
    Every failure is a PullError with a one-line message that never holds the token."""
    if fmt not in FORMATS:
        raise PullError(f"unknown format {fmt!r}; use tar.gz or zip")
    target = parse_target(url)
    secret = _token(token)
    dest = Path(out) if out is not None else Path.cwd() / target.project
    replace = _check_destination(dest, force)
    data, sha = _download(target, secret, version, fmt, limits, transport, timeout)
    files = read_archive(data, fmt, limits)
    _install(files, dest, replace)
    return Pulled(target.project, sha, dest, len(files))
