"""Fuzzing the upload archive reader (studio/projects/archives.py): thousands of
generated .zip and .tar.gz uploads (random members, nested paths, names git or a
filesystem treats specially, links and devices, duplicates, non-UTF-8 names and
contents, truncated and bit-flipped bytes). Each is either read, or refused with
ArchiveRefused, the module's one documented error; any other exception fails. What is
read is written out the way the studio does (studio.packs.materialize), and every file
lands inside the target folder: nothing appears beside it."""

from __future__ import annotations

import io
import os
import tarfile
import tempfile
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from studio.packs import materialize
from studio.projects.archives import ArchiveRefused, Limits, read_archive

LIMITS = Limits(max_total=64 * 1024, max_file=8 * 1024, max_files=40)
FUZZ = settings(max_examples=1200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- generated members ---------------------------------------------------------------------

plain = st.sampled_from(
    [
        "pack",
        "prompts",
        "grammars",
        "fakes",
        "manifest.yaml",
        "graph.yaml",
        "evalset.jsonl",
        "a.txt",
        "b.json",
        "é.txt",
        "日本.txt",
        "sub",
        "README.md",
        ".hidden",
        "a b.txt",
    ]
)
hostile = st.sampled_from(
    [
        ".git",
        ".GIT",
        ".Git ",
        "git~1",
        "GIT~1",
        ".gitmodules",
        ".git.",
        "..",
        ".",
        "",
        "a\\b",
        "nul\0x",
        "CON",
        "aux.txt",
        "\u200c.git",
        ".g\u200dit",
        "e\u0301",
        "x" * 256,
        "~",
        "-rf",
        " ",
        "a:b",
        "*",
        "\udcff",
        "\udc80.txt",
    ]
) | st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=12)
clean_names = st.lists(plain, min_size=1, max_size=4).map("/".join)
hostile_names = st.lists(plain | hostile, min_size=1, max_size=5).map("/".join) | st.sampled_from(
    ["/etc/passwd", "../evil.txt", "pack/../../evil.txt", "./manifest.yaml", "pack//a.txt", "pack/", "/", "a/" * 40]
)
texts = st.text(max_size=64).map(str.encode)
contents = texts | st.binary(max_size=64) | st.text(max_size=64).map(lambda t: t.encode("utf-8", "surrogatepass"))
kinds = st.sampled_from(["file"] * 4 + ["dir", "symlink", "hardlink", "device", "fifo"])
# Mostly plain packs with one odd member at most: an archive with any bad member is
# refused whole, so eight random members would almost never reach the writing half.
plain_members = st.lists(
    st.tuples(clean_names, texts, st.just("file")), min_size=0, max_size=8, unique_by=lambda m: m[0].split("/")[0]
)
odd_member = st.tuples(hostile_names | clean_names, contents, kinds)


def _zip(entries: list[tuple[str, bytes, str]], compress: bool) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Duplicate name": duplicates are what we mean to send
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as zf:
            for name, data, kind in entries:
                info = zipfile.ZipInfo(name.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
                mode = {"dir": 0o040755, "symlink": 0o120777, "device": 0o020644, "fifo": 0o010644}.get(kind, 0o100644)
                info.external_attr = mode << 16
                zf.writestr(info, data)
    return buf.getvalue()


def _tar(entries: list[tuple[str, bytes, str]], fmt: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=fmt, encoding="utf-8", errors="surrogateescape") as tf:
        for name, data, kind in entries:
            info = tarfile.TarInfo(name)
            info.type = {
                "dir": tarfile.DIRTYPE,
                "symlink": tarfile.SYMTYPE,
                "hardlink": tarfile.LNKTYPE,
                "device": tarfile.CHRTYPE,
                "fifo": tarfile.FIFOTYPE,
            }.get(kind, tarfile.REGTYPE)
            if kind in ("symlink", "hardlink"):
                info.linkname = "../../etc/passwd"
            info.size = len(data) if info.type == tarfile.REGTYPE else 0
            try:
                tf.addfile(info, io.BytesIO(data) if info.type == tarfile.REGTYPE else None)
            except (ValueError, UnicodeError):  # a name this tar format cannot hold at all: leave it out
                continue
    return buf.getvalue()


@st.composite
def archives(draw: st.DrawFn) -> tuple[str, bytes]:
    entries = draw(plain_members)
    if draw(st.booleans()):
        entries.insert(draw(st.integers(0, len(entries))), draw(odd_member))
    if entries and draw(st.integers(0, 7)) == 0:
        entries.append(draw(st.sampled_from(entries)))  # a member given twice
    if draw(st.booleans()):
        filename = draw(st.sampled_from(["pack.zip", "PACK.ZIP"]))
        data = _zip(entries, draw(st.booleans()))
    else:
        filename = draw(st.sampled_from(["pack.tar.gz", "pack.tgz"]))
        data = _tar(entries, draw(st.sampled_from([tarfile.PAX_FORMAT, tarfile.GNU_FORMAT, tarfile.USTAR_FORMAT])))
    damage = draw(st.sampled_from(["none"] * 8 + ["truncate", "flip", "garbage"]))
    if damage == "truncate":
        data = data[: draw(st.integers(0, len(data)))]
    elif damage == "flip" and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
    elif damage == "garbage":
        data = draw(st.binary(max_size=200))
    return filename, data


def _everything_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


@FUZZ
@given(archives())
def test_it_reads_or_refuses_every_generated_archive_and_writes_only_inside_the_target(
    archive: tuple[str, bytes],
) -> None:
    filename, data = archive
    with tempfile.TemporaryDirectory(prefix="pf-fuzz-archive-") as tmp:
        target, beside = Path(tmp) / "target", Path(tmp) / "beside"
        beside.mkdir()
        try:
            files = read_archive(filename, data, LIMITS)
        except ArchiveRefused as exc:
            event(f"refused: {str(exc).split(':')[-1].strip()[:40]}")
            assert str(exc).strip(), "a refusal that says nothing"
            assert tmp not in str(exc), f"a refusal shows a server path: {exc}"
            return
        event("read")
        assert files, "read_archive accepted an archive with no files"
        assert len(files) <= LIMITS.max_files and all(len(b) <= LIMITS.max_file for b in files.values())
        for name, content in files.items():
            assert not os.path.isabs(name) and ".." not in name.split("/"), name
            content.decode("utf-8")
        materialize(files, target)
        written = {str(p.relative_to(target)) for p in target.rglob("*") if p.is_file()}
        assert written == set(files)
        for path in target.rglob("*"):
            assert not path.is_symlink() and path.resolve().is_relative_to(target.resolve()), path
        assert _everything_under(Path(tmp)) - {"beside"} == {
            "target",
            *(f"target/{p}" for p in _everything_under(target)),
        }


def test_it_reads_a_plain_pack_archive() -> None:
    """The fuzz's baseline: a well-formed archive is read, with its top folder stripped."""
    entries = [("demo/manifest.yaml", b"name: demo\n", "file"), ("demo/prompts/a.txt", b"hi {{ x }}\n", "file")]
    expected = {"manifest.yaml": b"name: demo\n", "prompts/a.txt": b"hi {{ x }}\n"}
    assert read_archive("demo.zip", _zip(entries, True), LIMITS) == expected
    assert read_archive("demo.tar.gz", _tar(entries, tarfile.PAX_FORMAT), LIMITS) == expected


def _patched_zip(name: str, patch: Callable[[bytes], bytes]) -> bytes:
    return patch(_zip([(name, b"x", "file")], compress=False))


def test_it_refuses_damaged_central_directories_the_fuzz_found() -> None:
    """A name flagged UTF-8 that is not (UnicodeDecodeError), and a 'version needed to
    extract' zipfile does not know (NotImplementedError), raised out of the reader."""
    bad_utf8 = _patched_zip("aéb.txt", lambda z: z.replace("é".encode(), b"\xf3\xa9"))

    def version_84(z: bytes) -> bytes:
        at = z.index(b"PK\x01\x02") + 6  # the central header's "version needed to extract"
        return z[:at] + bytes([84, 0]) + z[at + 2 :]

    for data in (bad_utf8, _patched_zip("a.txt", version_84)):
        with pytest.raises(ArchiveRefused, match="not a valid zip file"):
            read_archive("pack.zip", data, LIMITS)
