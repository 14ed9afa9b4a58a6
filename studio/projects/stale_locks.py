"""Lock files a crashed git writer left behind (`clear_stale_locks`): dulwich writes each
object or ref through `<name>.lock`, so a kill mid-write leaves one that refuses every
later write of the same object. studio.projects.storage clears them under its save lock."""

from __future__ import annotations

import os
import time
from pathlib import Path

STALE_LOCK_S = 60.0  # a dulwich lock file this old, that no process has open, was left by a crash


def _open_files() -> set[Path]:
    """Every file some process on this machine has open (what /proc lets us see)."""
    held: set[Path] = set()
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            for fd in fd_dir.iterdir():
                try:
                    held.add(Path(os.readlink(fd)))
                except OSError:
                    continue
        except OSError:  # the process ended, or is not ours to look at
            continue
    return held


def clear_stale_locks(root: Path, *, older_than_s: float = STALE_LOCK_S) -> list[Path]:
    """Remove the `*.lock` files under a repository's objects/ and refs/ (and
    packed-refs.lock) that a crashed writer left behind: dulwich writes each object or
    ref through `<name>.lock` (O_EXCL, renamed into place), so a kill mid-write leaves a
    0-byte lock that makes every later write of the same object fail with FileLocked.
    A lock is stale only when both hold: it is older than `older_than_s` (a writer on
    another host sharing the folder has had time to finish), and no process here has it
    open (a live dulwich writer holds its lock file open until it renames it). Callers
    hold the repository's save lock, so no packforge save is mid-write. Returns the
    files removed."""
    now = time.time()
    found = [p for sub in ("objects", "refs") for p in (root / sub).rglob("*.lock")]
    found += [p for p in [root / "packed-refs.lock"] if p.exists()]
    old = []
    for path in found:
        try:
            if path.is_file() and now - path.stat().st_mtime >= older_than_s:
                old.append(path)
        except OSError:
            continue
    if not old:
        return []
    held = _open_files()
    removed = []
    for path in old:
        if path.resolve() in held:
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        removed.append(path)
    return removed
