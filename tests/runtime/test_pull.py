"""`packforge pull`: against the real studio on loopback, and the safe unpacker on its own."""

from __future__ import annotations

import io
import os
import re
import socket
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime.cli import main
from runtime.pull import Limits, PullError, parse_target, pull, read_archive

REPO = Path(__file__).resolve().parents[2]
TOKEN = "pf_" + "s3cret" * 6  # a well-formed token no studio issued


def packforge(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k != "PACKFORGE_TOKEN"}
    clean["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "runtime", *args],
        cwd=cwd,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


# -- against a real studio ------------------------------------------------------------------------


@pytest.fixture
def studio(live_server: Any, settings: Any, tmp_path: Path) -> tuple[str, str]:
    """The studio on loopback with support_triage as project `triage`; (url, owner's token)."""
    from django.contrib.auth.models import User

    from studio.accounts.models import ApiToken
    from studio.projects.models import create_project
    from studio.projects.views import example_files

    settings.GIT_ROOT = tmp_path / "git"
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    owner = User.objects.create_user("olive", "olive@example.com", "pw")
    create_project(slug="triage", name="Support triage", owner=owner, pack_files=example_files("support_triage"))
    _, token = ApiToken.issue(owner, "cli")
    return str(live_server.url), token


def test_it_pulls_a_pack_that_then_evaluates(studio: tuple[str, str], tmp_path: Path) -> None:
    url, token = studio
    pulled = packforge("pull", f"{url}/triage", "--out", "tmp", "--token", token, cwd=tmp_path)
    assert pulled.returncode == 0, pulled.stderr
    assert "pulled triage @ " in pulled.stdout and "tmp" in pulled.stdout and token not in pulled.stdout
    assert (tmp_path / "tmp" / "manifest.yaml").is_file() and (tmp_path / "tmp" / "fakes" / "scripted.json").is_file()
    assert packforge("validate", "tmp", cwd=tmp_path).returncode == 0
    evaluated = packforge("eval", "tmp", cwd=tmp_path)
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr


def test_it_pulls_a_zip_with_the_token_from_the_environment(studio: tuple[str, str], tmp_path: Path) -> None:
    url, token = studio
    pulled = packforge("pull", f"{url}/p/triage/", "--format", "zip", cwd=tmp_path, env={"PACKFORGE_TOKEN": token})
    assert pulled.returncode == 0, pulled.stderr
    assert (tmp_path / "triage" / "graph.yaml").is_file()  # the default folder is ./PROJECT
    assert f"into {tmp_path / 'triage'} (" in pulled.stdout  # named in full: where it wrote is said


def test_it_refuses_a_bad_token_in_one_line(studio: tuple[str, str], tmp_path: Path) -> None:
    url, _ = studio
    refused = packforge("pull", f"{url}/triage", "--token", TOKEN, cwd=tmp_path)
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert "refused the token (invalid or revoked token)" in refused.stderr
    assert TOKEN not in refused.stderr + refused.stdout
    assert not (tmp_path / "triage").exists()


def test_it_reports_an_unknown_project_or_version(studio: tuple[str, str], tmp_path: Path) -> None:
    url, token = studio
    with pytest.raises(PullError, match=r"no project 'nope' at .*, or you are not a member of it"):
        pull(f"{url}/nope", token=token, out=tmp_path / "a")
    with pytest.raises(PullError, match="the studio answered 404: no version 'zz'"):
        pull(f"{url}/triage", token=token, version="zz", out=tmp_path / "b")


# -- without a server --------------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_it_reports_an_unreachable_studio_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["pull", f"http://127.0.0.1:{_closed_port()}/triage", "--token", TOKEN, "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: cannot reach the studio at http://127.0.0.1:")
    assert err.count("\n") == 1 and TOKEN not in err


@pytest.mark.parametrize(
    "url, message",
    [
        ("localhost:8000/triage", "is not a studio address"),
        ("http://localhost:8000/", "names no project"),
        ("http://localhost:8000/Bad Name", "is not a project name"),
        ("http://me:pw@localhost:8000/triage", "not in the URL"),
    ],
)
def test_it_refuses_a_bad_url(url: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pull", url, "--token", TOKEN]) == 2
    assert message in capsys.readouterr().err


def test_it_needs_a_token(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("PACKFORGE_TOKEN", raising=False)
    assert main(["pull", "http://localhost:8000/triage"]) == 2
    assert "no token: pass --token TOKEN or set PACKFORGE_TOKEN" in capsys.readouterr().err


def test_it_finds_the_studio_and_project_in_a_url() -> None:
    assert parse_target("https://h.example/studio/p/triage/") == parse_target("https://h.example/studio/triage")
    target = parse_target("http://localhost:8000/api/projects/triage")
    assert (target.studio, target.project) == ("http://localhost:8000", "triage")


def _tar(members: list[tarfile.TarInfo], data: bytes = b"x") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for info in members:
            tf.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return buf.getvalue()


def _file(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = 1
    return info


def _link(name: str, to: str, kind: bytes = tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, to
    return info


@pytest.mark.parametrize(
    "members, message",
    [
        ([_file("p/../../evil")], "outside the folder"),
        ([_file("/etc/evil")], "outside the folder"),
        ([_file("p/a"), _link("p/b", "/etc/passwd")], "a link or special file"),
        ([_link("p/b", "../../x", tarfile.LNKTYPE)], "a link or special file"),
        ([_file("p/a\\..\\b")], "not a plain relative path"),
    ],
)
def test_it_refuses_unsafe_tar_members(members: list[tarfile.TarInfo], message: str) -> None:
    with pytest.raises(PullError, match=message):
        read_archive(_tar(members), "tar.gz")


def test_it_refuses_a_zip_symlink_and_a_zip_escape() -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        link = zipfile.ZipInfo("p/link")
        link.external_attr = 0o120777 << 16
        zf.writestr(link, "/etc/passwd")
    with pytest.raises(PullError, match="a link or special file"):
        read_archive(buf.getvalue(), "zip")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("../escape", "x")
    with pytest.raises(PullError, match="outside the folder"):
        read_archive(buf.getvalue(), "zip")


def test_it_refuses_an_archive_over_the_limits() -> None:
    with pytest.raises(PullError, match="more than 1 files"):
        read_archive(_tar([_file("p/a"), _file("p/b")]), "tar.gz", Limits(max_files=1))
    with pytest.raises(PullError, match=r"not a readable \.tar\.gz"):
        read_archive(b"not an archive", "tar.gz")


@pytest.mark.parametrize(
    "name, message",
    [
        ("p/.git/config", "git's own folder"),
        ("p/sub/.GIT/config", ".git"),
        ("p/.git./config", ".git"),
        ("p/git~1/config", ".git"),
        ("p/.g\u200cit/config", ".git"),
        ("p/.gitmodules", ".gitmodules"),
        ("p/prompts/" + "é" * 150 + ".txt", "at most 255"),
    ],
)
def test_it_refuses_a_git_folder_and_names_a_filesystem_cannot_hold(name: str, message: str) -> None:
    with pytest.raises(PullError, match=re.escape(message)):
        read_archive(_tar([_file("p/manifest.yaml"), _file(name)]), "tar.gz")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("p/manifest.yaml", "x")
        zf.writestr(name, "[core]\n\tfsmonitor = touch pwned\n")
    with pytest.raises(PullError, match=re.escape(message)):
        read_archive(buf.getvalue(), "zip")


def test_it_refuses_an_empty_git_folder_and_a_name_that_is_not_utf8() -> None:
    folder = tarfile.TarInfo("p/.git")
    folder.type = tarfile.DIRTYPE
    with pytest.raises(PullError, match="git's own folder"):
        read_archive(_tar([_file("p/a"), folder]), "tar.gz")
    with pytest.raises(PullError, match="not valid UTF-8"):
        read_archive(_tar([_file("p/a"), _file(b"p/caf\xe9".decode("utf-8", "surrogateescape"))]), "tar.gz")


def test_it_pulls_nothing_that_git_would_run(tmp_path: Path) -> None:
    evil = _tar([_file("p/manifest.yaml"), _file("p/.git/config")], data=b"[core]\n\tfsmonitor = touch pwned\n")
    with pytest.raises(PullError, match="git's own folder"):
        pull("http://studio/triage", token=TOKEN, out=tmp_path / "out", transport=_studio(evil))
    assert list(tmp_path.iterdir()) == []


def _studio(archive: bytes, status: int = 200) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        assert request.headers["Authorization"] == f"Bearer {TOKEN}"
        return httpx.Response(status, content=archive, headers={"X-Packforge-Version": "a" * 40})

    return httpx.MockTransport(answer)


def test_it_writes_nothing_when_the_archive_is_refused(tmp_path: Path) -> None:
    evil = _tar([_file("p/ok.txt"), _link("p/b", "/etc/passwd")])
    with pytest.raises(PullError):
        pull("http://studio/triage", token=TOKEN, out=tmp_path / "out", transport=_studio(evil))
    assert list(tmp_path.iterdir()) == []


def test_it_refuses_a_non_empty_folder_unless_forced(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("keep me")
    good = _tar([_file("triage/manifest.yaml")])
    with pytest.raises(PullError, match="is not empty; pass --force"):
        pull("http://studio/triage", token=TOKEN, out=out, transport=_studio(good))
    assert (out / "old.txt").read_text() == "keep me"
    pulled = pull("http://studio/triage", token=TOKEN, out=out, force=True, transport=_studio(good))
    assert sorted(p.name for p in out.iterdir()) == ["manifest.yaml"] and pulled.version == "a" * 40
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging folders left behind


def test_it_refuses_to_replace_the_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mine.txt").write_text("x")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PullError, match="refusing to replace"):
        pull("http://studio/triage", token=TOKEN, out=".", force=True, transport=_studio(b""))
    assert (tmp_path / "mine.txt").exists()


def test_it_explains_an_answer_that_is_not_from_a_studio(tmp_path: Path) -> None:
    with pytest.raises(PullError, match="answered 404 Not Found, not a studio's answer"):
        pull("http://studio/triage", token=TOKEN, out=tmp_path / "o", transport=_studio(b"<html>", 404))


def test_it_fills_an_empty_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    pull("http://studio/triage", token=TOKEN, out=".", transport=_studio(_tar([_file("triage/prompts/a.txt")])))
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == ["prompts", "prompts/a.txt"]


def _with_compression_method(data: bytes, method: int) -> bytes:
    """A zip whose one member claims a compression method zipfile cannot read."""
    raw = bytearray(data)
    for signature, offset in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):  # local header, central directory
        at = raw.find(signature)
        raw[at + offset : at + offset + 2] = method.to_bytes(2, "little")
    return bytes(raw)


def test_it_refuses_a_zip_it_cannot_decompress_without_a_traceback() -> None:
    from runtime.pull import Limits, PullError, _read_zip

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("pack/manifest.yaml", "name: x\n")
    with pytest.raises(PullError, match=r"not a readable \.zip"):
        _read_zip(_with_compression_method(buf.getvalue(), 99), Limits())
