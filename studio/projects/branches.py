"""Proposal branches in a project's repository (docs/proposals.md).

A proposal's branch, `proposals/<n>`, starts at a commit of `main` (its base) and takes
saves like `main` does (PackRepo.save with `branch=`). Merging it back is a fast-forward
when `main` has not moved since the base; else a merge commit when the two sides changed
different files; else it is refused with what `main` changed meanwhile in the files both
sides touched, the same no-lost-update rule a stale save follows; `sync` then brings main
into the branch with the author's resolution of those files, and the merge becomes a
fast-forward. A merge takes the head that was reviewed and is refused if the branch moved
since. Everything here holds the repository's lock and moves refs by compare-and-swap."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from dulwich.diff_tree import tree_changes
from dulwich.object_store import commit_tree_changes
from dulwich.objects import Blob, Commit, ObjectID

from studio.projects.storage import (
    FILE_MODE,
    FileChange,
    PackRepo,
    StorageError,
    _author,
    _oid,
    branch_ref,
    check_paths,
)

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
            "bring main into the proposal with your version of them (sync), then merge"
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


def _commit(repo: PackRepo, tree: ObjectID, parents: list[str], *, author: str, email: str, message: str) -> ObjectID:
    commit = Commit()
    commit.tree = tree
    commit.parents = [_oid(p) for p in parents]
    commit.author = commit.committer = _author(author, email)
    commit.author_time = commit.commit_time = int(time.time())
    commit.author_timezone = commit.commit_timezone = 0
    commit.encoding = b"UTF-8"
    commit.message = message.strip().encode() + b"\n"
    repo.repo.object_store.add_object(commit)
    return commit.id


def _entries(changed: dict[bytes, tuple[int, ObjectID] | None]) -> list[tuple[bytes, int | None, ObjectID | None]]:
    return [(path, got[0] if got else None, got[1] if got else None) for path, got in sorted(changed.items())]


def _tips(repo: PackRepo, branch: str, head: str) -> str:
    """Main's tip, after checking that `branch` is still at `head` (what was reviewed)."""
    main, tip = repo.head(), repo.head(branch)
    if main is None or tip is None:
        raise StorageError(f"no branch {branch!r}" if tip is None else "the project has no commits")
    if tip != head:
        raise StorageError(f"the proposal moved to {tip[:10]} since {head[:10]}; read it again")
    return main


def merge(repo: PackRepo, branch: str, *, base: str, head: str, author: str, email: str, message: str) -> Merged:
    """Bring `branch` (started at `base`, expected at `head`: what was reviewed) into main."""
    with repo._locked():
        main = _tips(repo, branch, head)
        if head == base:
            raise StorageError("the proposal changes nothing yet")
        if on_main(repo, head):
            raise StorageError(f"{head[:10]} is on main already")
        refs = repo.repo.refs
        if main == base:
            if not refs.set_if_equals(branch_ref("main"), _oid(main), _oid(head)):
                raise StorageError("main moved during the merge; try again")
            return Merged(head, "fast-forward")
        ours, theirs = _changed(repo, base, main), _changed(repo, base, head)
        clash = sorted(p.decode() for p in ours.keys() & theirs.keys() if ours[p] != theirs[p])
        if clash:
            raise MergeConflict(clash, [c for c in repo.diff(base, main) if c.path in clash])
        tree = commit_tree_changes(
            repo.repo.object_store, repo._tree(main), _entries({p: g for p, g in theirs.items() if p not in ours})
        )
        made = _commit(repo, tree, [main, head], author=author, email=email, message=message)
        if not refs.set_if_equals(branch_ref("main"), _oid(main), made):
            raise StorageError("main moved during the merge; try again")
        return Merged(made.decode(), "merge commit")


def sync(
    repo: PackRepo,
    branch: str,
    *,
    base: str,
    head: str,
    resolved: Mapping[str, bytes | None],
    author: str,
    email: str,
    message: str,
) -> tuple[str, str]:
    """Bring main into `branch` (started at `base`, now at `head`): a merge commit on the
    branch whose tree is main's plus the branch's changes, with `resolved` (repository
    path -> bytes, None to delete) for every file both sides changed differently.
    Returns (the branch's new head, its new base: main's tip). MergeConflict, naming the
    files, when one of those is not resolved."""
    with repo._locked():
        main = _tips(repo, branch, head)
        if main == base:
            raise StorageError("the proposal is on main's tip already; nothing to bring in")
        ours, theirs = _changed(repo, base, main), _changed(repo, base, head)
        clash = sorted(p.decode() for p in ours.keys() & theirs.keys() if ours[p] != theirs[p])
        missing = [p for p in clash if p not in resolved]
        if missing:
            raise MergeConflict(missing, [c for c in repo.diff(base, main) if c.path in missing])
        check_paths({p: d for p, d in resolved.items() if d is not None})
        store = repo.repo.object_store
        changes = {p: g for p, g in theirs.items() if p not in ours}
        for path, data in resolved.items():
            if data is None:
                changes[path.encode()] = None
            else:
                blob = Blob.from_string(data)
                store.add_object(blob)
                changes[path.encode()] = (FILE_MODE, blob.id)
        tree = commit_tree_changes(store, repo._tree(main), _entries(changes))
        made = _commit(repo, tree, [head, main], author=author, email=email, message=message)
        if not repo.repo.refs.set_if_equals(branch_ref(branch), _oid(head), made):
            raise StorageError("the proposal moved during the update; try again")
        return made.decode(), main


def on_main(repo: PackRepo, sha: str) -> bool:
    """Whether commit `sha` is main's tip or in main's history."""
    main = repo.head()
    if main is None:
        return False
    if main == sha:
        return True
    return any(e.commit.id.decode() == sha for e in repo.repo.get_walker(include=[_oid(main)], max_entries=MAX_HISTORY))
