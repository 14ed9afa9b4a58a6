"""Which file paths a pack may hold: one rule for uploads, saves, storage, downloads and pulls.

A pack travels to people's machines (a download, `packforge pull`), usually into or beside
a git work tree. A file git takes as its own there runs code: `.git/config` with
`core.fsmonitor = <command>` runs the command on the next `git status`. So every place a
path enters or leaves a pack asks `path_problem`, and refuses the path when it answers.

The git rules are git's own (`verify_path` in read-cache.c, `is_ntfs_dotgit` and
`is_ntfs_dot_generic` in path.c, `is_hfs_dotgit` in utf8.c, the `hasDotgit` and
`.gitmodules` checks in fsck.c), with protectHFS and protectNTFS both on, because a pack
made on Linux is unpacked on macOS and Windows too:

- `.git` in any case, at any depth, also as HFS+ sees it (ignoring zero-width and
  direction marks: `.g\\u200cit`) and as NTFS sees it (trailing dots and spaces dropped,
  `.git.`, `.GIT `; the 8.3 short name `git~1`; an alternate data stream `.git::$DATA`);
- the other names git reads from a work tree, with the same tricks: `.gitmodules`
  (also its short names `gitmod~1`, `gi7eba~1`), `.gitattributes`, `.gitignore`,
  `.mailmap`. Git only refuses these as symlinks; a pack needs none of them, so they are
  refused outright (a `.gitattributes` can name filter and diff drivers, a `.gitmodules`
  makes `git clone --recurse-submodules` fetch from anywhere);
- what no filesystem can hold or no path may say: empty names, `.`, `..`, a leading `/`,
  a drive (`C:`), backslashes, control characters, text that is not UTF-8, a name over
  255 bytes (NAME_MAX on Linux, macOS and Windows), a path over 1024 bytes or 32 levels.
"""

from __future__ import annotations

import re

__all__ = ["MAX_DEPTH", "MAX_NAME_BYTES", "MAX_PATH_BYTES", "git_special", "name_problem", "path_problem", "shown"]

MAX_NAME_BYTES = 255  # one path component, in UTF-8: what ext4, APFS and NTFS hold
MAX_PATH_BYTES = 1024  # the whole path: far above any pack, far below PATH_MAX with a base folder
MAX_DEPTH = 32  # folders deep; git itself stops at 2048 and Python's recursion before that

# Code points HFS+ ignores when comparing names (git's next_hfs_char).
_HFS_IGNORED = frozenset(
    chr(c) for c in (0x200C, 0x200D, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF)
)
# Names git reads from a work tree -> the prefix of the hashed NTFS short name Windows may
# give them (git's is_ntfs_dotgitmodules and friends).
_GIT_NAMES = {
    "git": "",
    "gitmodules": "gi7eba",
    "gitignore": "gi250a",
    "gitattributes": "gi7d29",
    "mailmap": "maba30",
}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DRIVE = re.compile(r"^[A-Za-z]:")


def _ntfs_base(name: str) -> str:
    """The name NTFS stores: an alternate data stream (`:...`) and trailing dots and
    spaces dropped, in lower case."""
    return name.split(":", 1)[0].rstrip(" .").lower()


def _ntfs_short(base: str, needle: str, hashed: str) -> bool:
    if needle == "git":
        return base == "git~1"
    if re.fullmatch(re.escape(needle[:6]) + "~[1-4]", base):
        return True
    # the fall-back short name: up to six characters of `hashed`, '~', then digits, eight in all
    return len(base) == 8 and any(re.fullmatch(re.escape(hashed[:j]) + "~[1-9][0-9]*", base) for j in range(7))


def git_special(name: str) -> str | None:
    """The git file `name` (one path component) stands for on some filesystem, or None.
    A backslash separates folders on Windows, so each piece between them counts too."""
    for piece in name.split("\\"):
        hfs = "".join(c for c in piece if c not in _HFS_IGNORED).casefold()
        base = _ntfs_base(piece)
        for needle, hashed in _GIT_NAMES.items():
            if hfs == "." + needle or base == "." + needle or _ntfs_short(base, needle, hashed):
                return "." + needle
    return None


def name_problem(name: str) -> str | None:
    """Why one path component cannot be stored in a pack, or None."""
    if name in ("", ".", ".."):
        return "empty, '.' and '..' are not file or folder names"
    special = git_special(name)
    if special is not None:
        what = "git's own folder" if special == ".git" else f"a file git reads ({special})"
        shown = "" if name == special else f" ({name!r} is {special} to git on some systems)"
        return f"{what} cannot be part of a pack{shown}"
    size = len(name.encode("utf-8"))
    if size > MAX_NAME_BYTES:
        return f"a name is {size} bytes in UTF-8; filesystems hold at most {MAX_NAME_BYTES}"
    return None


def path_problem(path: str, *, under: str = "") -> str | None:
    """Why `path` (relative, '/'-separated) cannot be stored in a pack, or None when it can.

    `under` is the folder the path will be stored in (`pack/`), counted in the length and
    depth limits but not checked itself. The answer never repeats the path; callers name it."""
    if not isinstance(path, str) or not path:
        return "the path is empty"
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return "the name is not valid UTF-8 text"
    if _CONTROL.search(path):
        return "control characters are not allowed in names"
    if "\\" in path:
        return "backslashes are not allowed in names (Windows reads them as folder separators)"
    if path.startswith("/") or _DRIVE.match(path):
        return "the path is absolute; give a path inside the pack"
    parts = path.split("/")
    for part in parts:
        problem = name_problem(part)
        if problem is not None:
            return problem
    full = under + path
    if len(full.split("/")) > MAX_DEPTH:
        return f"the path is more than {MAX_DEPTH} folders deep"
    if len(full.encode("utf-8")) > MAX_PATH_BYTES:
        return f"the path is over {MAX_PATH_BYTES} bytes"
    return None


def shown(path: str, limit: int = 120) -> str:
    """`path` quoted for a message: printable (a name that is not UTF-8 shows its bytes as
    escapes) and cut to about `limit` characters, so a refusal never echoes kilobytes."""
    text = path.encode("utf-8", "backslashreplace").decode("utf-8")
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")
