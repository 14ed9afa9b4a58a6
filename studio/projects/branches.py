"""Proposal branches in a project's repository (docs/proposals.md).

A proposal's branch, `proposals/<n>`, starts at a commit of `main` (its base) and takes
saves like `main` does (PackRepo.save with `branch=`). Merging it back is a fast-forward
when `main` has not moved since the base; else a merge commit when the two sides changed
different files; else it is refused with what `main` changed meanwhile in the files both
sides touched, the same no-lost-update rule a stale save follows. Everything here holds
the repository's lock and moves refs by compare-and-swap."""

from __future__ import annotations

import time
from dataclasses import dataclass

from dulwich.diff_tree import tree_changes
from dulwich.object_store import commit_tree_changes
from dulwich.objects import Commit, ObjectID

from studio.projects.storage import FileChange, PackRepo, StorageError, _author, _oid, branch_ref

MAX_HISTORY = 10_000  # commits walked to decide whether a version is on main


class MergeConflict(StorageError):
    """Both sides changed the same files since the base; `changes` is what main did to them."""

    status = 409

    def __init__(self, paths: list[str], changes: list[FileChange]) -> None:
        self.paths = paths
        self.changes = changes
        shown = ", ".join(paths[:5]) + (" ..." if len(paths) > 5 else "")
        super().__init__(
            f"main changed {len(paths)} file(s) this proposal also changes ({shown}); "
            "update the proposal on top of main, then merge"
        )


@dataclass(frozen=True)
class Merged:
    sha: str  # main's new tip
    how: str  # fast-forward | merge commit


def open_branch(repo: PackRepo, branch: str, at: str) -> None:
    """Make `branch` point at commit `at`; refused if it exists."""
    with repo._locked():
        if not repo.repo.refs.add_if_new(branch_ref(branch), _oid(repo.resolve(at))):
            raise StorageError(f"branch {branch!r} exists")


def _changed(repo: PackRepo, a: str, b: str) -> dict[bytes, tuple[int, ObjectID] | None]:
    """path -> (mode, blob) as `b` has it, or None where `b` deleted it; only paths `a`..`b` changed."""
    out: dict[bytes, tuple[int, ObjectID] | None] = {}
    for change in tree_changes(repo.repo.object_store, repo._tree(a), repo._tree(b)):
        if change.old is not None and change.old.path is not None:
            out.setdefault(change.old.path, None)
        if change.new is not None and change.new.path is not None:
            assert change.new.mode is not None and change.new.sha is not None
            out[change.new.path] = (change.new.mode, change.new.sha)
    return out


def merge(repo: PackRepo, branch: str, *, base: str, author: str, email: str, message: str) -> Merged:
    """Bring `branch` (started at `base`) into main."""
    with repo._locked():
        main, head = repo.head(), repo.head(branch)
        if main is None or head is None:
            raise StorageError(f"no branch {branch!r}" if head is None else "the project has no commits")
        if head == base:
            raise StorageError("the proposal changes nothing yet")
        refs = repo.repo.refs
        if main == base:
            if not refs.set_if_equals(branch_ref("main"), _oid(main), _oid(head)):
                raise StorageError("main moved during the merge; try again")
            return Merged(head, "fast-forward")
        ours, theirs = _changed(repo, base, main), _changed(repo, base, head)
        clash = sorted(p.decode() for p in ours.keys() & theirs.keys() if ours[p] != theirs[p])
        if clash:
            raise MergeConflict(clash, [c for c in repo.diff(base, main) if c.path in clash])
        store = repo.repo.object_store
        entries = [
            (path, got[0] if got else None, got[1] if got else None)
            for path, got in sorted(theirs.items())
            if path not in ours
        ]
        commit = Commit()
        commit.tree = commit_tree_changes(store, repo._tree(main), entries)
        commit.parents = [_oid(main), _oid(head)]
        commit.author = commit.committer = _author(author, email)
        commit.author_time = commit.commit_time = int(time.time())
        commit.author_timezone = commit.commit_timezone = 0
        commit.encoding = b"UTF-8"
        commit.message = message.strip().encode() + b"\n"
        store.add_object(commit)
        if not refs.set_if_equals(branch_ref("main"), _oid(main), commit.id):
            raise StorageError("main moved during the merge; try again")
        return Merged(commit.id.decode(), "merge commit")


def on_main(repo: PackRepo, sha: str) -> bool:
    """Whether commit `sha` is main's tip or in main's history."""
    main = repo.head()
    if main is None:
        return False
    if main == sha:
        return True
    return any(e.commit.id.decode() == sha for e in repo.repo.get_walker(include=[_oid(main)], max_entries=MAX_HISTORY))
