"""Git-backed pack storage (dulwich): one bare repository per project, branch `main`.

Every save is a commit that names the commit it was based on. Saves are serialised per
repository by an exclusive file lock, and the branch moves by compare-and-swap, so two
processes saving at once never corrupt the repository or lose a commit: the second
save finds the branch moved and is refused with the diff to the newer version.

Every path is checked by `runtime.paths.path_problem` before it is stored (no `.git`, no
name a filesystem cannot hold), a refused create leaves no repository behind, and
`tree_problems`/`fsck` check what is stored the same way, as git's fsck would, before an
archive of it is handed out. Messages never name the server's folders."""

from __future__ import annotations

import fcntl
import io
import shutil
import tarfile
import time
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from dulwich.diff_tree import CHANGE_ADD, CHANGE_DELETE, tree_changes
from dulwich.errors import NotGitRepository
from dulwich.file import FileLocked
from dulwich.object_store import commit_tree_changes, iter_tree_contents, tree_lookup_path
from dulwich.objects import Blob, Commit, ObjectID, Tree, TreeEntry, parse_tree
from dulwich.refs import HEADREF, Ref
from dulwich.repo import Repo

from runtime import MAX_PATH_DEPTH as MAX_DEPTH
from runtime import path_problem
from runtime import shown_path as shown
from studio.errors import Refused
from studio.projects.diff_rows import side_by_side
from studio.projects.stale_locks import clear_stale_locks
from studio.work import caps

BRANCH = Ref(b"refs/heads/main")
FILE_MODE = 0o100644
DIR_MODE = 0o040000
STORED_FILE_MODES = (0o100644, 0o100755)
ORPHAN_AGE_S = 600  # a create takes well under a second; a folder this old with no commit is an orphan


class StorageError(Refused):
    """A version, a save or a path the repository refuses (400 unless the caller says
    otherwise); a missing repository is the server's fault (500)."""


class UnsafePath(StorageError):
    """A path that may not be stored, or a stored tree holding one (see runtime.paths)."""


@dataclass
class Version:
    sha: str
    author: str
    time: float
    message: str


@dataclass
class FileChange:
    path: str
    status: str  # added | modified | deleted
    old: str
    new: str
    rows: list[tuple[int | None, str, int | None, str, str]] = field(default_factory=list)
    # side by side: (old line no, old text, new line no, new text, kind: same|del|add|change)


class StaleBase(StorageError):
    """The branch moved since the commit a save was based on."""

    status = 409

    def __init__(self, base: str, head: str, changes: list[FileChange]) -> None:
        self.base = base
        self.head = head
        self.changes = changes
        super().__init__(f"this save was based on {base[:10]}, but the project is now at {head[:10]}")


def branch_ref(branch: str) -> Ref:
    """The ref of `main` or of a proposal's branch (`proposals/<n>`); no other name is taken."""
    if branch != "main" and not (branch.startswith("proposals/") and branch[10:].isdigit()):
        raise StorageError(f"no branch {branch!r}")
    return Ref(f"refs/heads/{branch}".encode())


def _oid(sha: str) -> ObjectID:
    """A hex commit/object sha as dulwich's object id type."""
    return ObjectID(sha.encode())


def _author(name: str, email: str) -> bytes:
    clean = name.replace("<", "").replace(">", "").replace("\n", " ").strip() or "unknown"
    return f"{clean} <{email or 'nobody@packforge.local'}>".encode()


class PackRepo:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        if not (self.path / "HEAD").exists():
            raise StorageError("the project's repository is missing", status=500)
        self.repo = Repo(str(self.path))

    @classmethod
    def create(cls, path: Path, files: dict[str, bytes], *, author: str, email: str, message: str) -> PackRepo:
        """A new repository at `path` whose first commit holds `files`. Refused paths are
        refused before anything is made; any failure after that removes the folder, so
        a failed create never leaves a repository that blocks the name."""
        check_paths(files)
        cls._claim(path)
        try:
            repo = Repo.init_bare(str(path))
            repo.refs.set_symbolic_ref(HEADREF, BRANCH)
            pack = cls(path)
            pack.save(files, base=None, author=author, email=email, message=message)
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)
            raise
        return pack

    @staticmethod
    def _claim(path: Path) -> None:
        """Make the folder for a new repository: of two creates of one name exactly one
        gets it. A folder left by a create that failed under older code (a repository
        with no commit, untouched for ORPHAN_AGE_S) is removed first, so it no longer
        blocks the name; a create in flight is younger than that and is left alone. The
        check and the claim hold one lock per folder of repositories."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.parent / ".create.lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if _is_orphan(path):
                    shutil.rmtree(path)
                path.mkdir()
            except FileExistsError:
                raise StorageError("a repository with this name already exists") from None
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self.path / "packforge.lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def head(self, branch: str = "main") -> str | None:
        """The tip of `branch` (`main`, or a proposal's `proposals/<n>`), None when it has none."""
        try:
            return self.repo.refs[branch_ref(branch)].decode()
        except KeyError:
            return None

    def resolve(self, version: str | None) -> str:
        """A full commit sha from a sha, a unique prefix of one, or None (the head)."""
        if version is None or version in ("", "head", "main"):
            head = self.head()
            if head is None:
                raise StorageError("the project has no commits")
            return head
        if len(version) == 40:
            try:
                if isinstance(self.repo[_oid(version)], Commit):
                    return version
            except (KeyError, ValueError):
                pass
            raise StorageError(f"no version {version}")
        if len(version) < 4 or not all(c in "0123456789abcdef" for c in version):
            raise StorageError(f"no version {version!r}; give a commit sha (at least 4 hex digits)")
        matches = [v.sha for v in self.log(limit=10_000) if v.sha.startswith(version)]
        if len(matches) != 1:
            raise StorageError(f"no version {version}" if not matches else f"version {version} is ambiguous")
        return matches[0]

    def log(self, limit: int = 200) -> list[Version]:
        head = self.head()
        if head is None:
            return []
        out = []
        for entry in self.repo.get_walker(include=[_oid(head)], max_entries=limit):
            c = entry.commit
            out.append(
                Version(
                    c.id.decode(),
                    c.author.decode(errors="replace"),
                    float(c.commit_time),
                    c.message.decode(errors="replace").strip(),
                )
            )
        return out

    def _tree(self, sha: str) -> ObjectID:
        commit = self.repo[_oid(sha)]
        assert isinstance(commit, Commit)
        return commit.tree

    def files(self, version: str | None = None, prefix: str = "") -> dict[str, bytes]:
        sha = self.resolve(version)
        out: dict[str, bytes] = {}
        for entry in iter_tree_contents(self.repo.object_store, self._tree(sha)):
            path = entry.path.decode()
            if path.startswith(prefix):
                blob = self.repo[entry.sha]
                assert isinstance(blob, Blob)
                out[path[len(prefix) :]] = blob.data
        return out

    def save(
        self,
        changes: Mapping[str, bytes | None],
        *,
        base: str | None,
        author: str,
        email: str,
        message: str,
        branch: str = "main",
    ) -> str:
        """Commit `changes` (path -> new bytes, or None to delete) on top of `base`, on
        `branch` (an existing one, or `main` for the first commit).

        Raises StaleBase when the branch is no longer at `base`. A save that finds a
        `.lock` file a crashed writer left (dulwich's FileLocked) clears the stale ones
        (`clear_stale_locks`) and tries once more."""
        try:
            return self._save(changes, base=base, author=author, email=email, message=message, branch=branch)
        except FileLocked:
            with self._locked():
                cleared = clear_stale_locks(self.path)
            if not cleared:
                raise StorageError("another save is writing the same content; try again in a minute") from None
            return self._save(changes, base=base, author=author, email=email, message=message, branch=branch)

    def _save(
        self,
        changes: Mapping[str, bytes | None],
        *,
        base: str | None,
        author: str,
        email: str,
        message: str,
        branch: str,
    ) -> str:
        if not message.strip():
            raise StorageError("a save needs a message")
        check_paths({path: data for path, data in changes.items() if data is not None})  # removing is always safe
        manifest = changes.get(caps.MANIFEST)
        problem = caps.manifest_problem(manifest) if manifest is not None else None
        if problem is not None:
            raise StorageError(problem)
        with self._locked():
            head = self.head(branch)
            if head is None and branch != "main":
                raise StorageError(f"no branch {branch!r}")
            if head != base:
                if base is None or head is None:
                    raise StorageError("the project's history does not match this save")
                raise StaleBase(base, head, self.diff(base, head))
            store = self.repo.object_store
            if head is None:
                empty = Tree()
                store.add_object(empty)
                root: ObjectID = empty.id
            else:
                root = self._tree(head)
            entries: list[tuple[bytes, int | None, ObjectID | None]] = []
            for path, data in sorted(changes.items()):
                if data is None:
                    # dulwich raises KeyError for a path that is not in the tree
                    try:
                        tree_lookup_path(self.repo.__getitem__, root, path.encode())
                    except KeyError:
                        raise StorageError(f"cannot delete {path}: no such file") from None
                    entries.append((path.encode(), None, None))
                else:
                    blob = Blob.from_string(data)
                    store.add_object(blob)
                    entries.append((path.encode(), FILE_MODE, blob.id))
            tree = commit_tree_changes(store, root, entries)
            if head is not None and tree == root:
                raise StorageError("nothing changed")
            commit = Commit()
            commit.tree = tree
            commit.parents = [_oid(head)] if head else []
            commit.author = commit.committer = _author(author, email)
            commit.author_time = commit.commit_time = int(time.time())
            commit.author_timezone = commit.commit_timezone = 0
            commit.encoding = b"UTF-8"
            commit.message = message.strip().encode() + b"\n"
            store.add_object(commit)
            if not self.repo.refs.set_if_equals(branch_ref(branch), _oid(head) if head else None, commit.id):
                raise StorageError("the branch moved during the save; try again")
            return commit.id.decode()

    def diff(self, a: str, b: str, prefix: str = "") -> list[FileChange]:
        """File-by-file changes from version `a` to version `b`, with side-by-side rows."""
        store = self.repo.object_store
        out = []
        for change in tree_changes(store, self._tree(self.resolve(a)), self._tree(self.resolve(b))):
            entry = change.new if change.type == CHANGE_ADD else change.old
            assert entry is not None  # an added file has a new entry, any other change an old one
            path = entry.path.decode()
            if not path.startswith(prefix):
                continue
            old = self._entry_text(change.old) if change.type != CHANGE_ADD else ""
            new = self._entry_text(change.new) if change.type != CHANGE_DELETE else ""
            status = {CHANGE_ADD: "added", CHANGE_DELETE: "deleted"}.get(change.type, "modified")
            out.append(FileChange(path[len(prefix) :], status, old, new, side_by_side(old, new)))
        return sorted(out, key=lambda c: c.path)

    def _entry_text(self, entry: TreeEntry | None) -> str:
        if entry is None:
            return ""
        blob = self.repo[entry.sha]
        assert isinstance(blob, Blob)
        return blob.data.decode("utf-8", errors="replace")

    def tree_problems(self, version: str | None = None) -> list[str]:
        """`path: reason` for every entry of the tree at `version` that git's fsck would
        flag or `runtime.paths` refuses: `.git` and the other git names in every spelling,
        names no filesystem holds, entries that are not plain files or folders (symlinks,
        submodules), duplicate names, names that are not UTF-8. Empty when all is well."""
        return self._tree_problems(self._tree(self.resolve(version)), set())

    def fsck(self) -> list[str]:
        """`commit: path: reason` for every problem in every commit reachable from the branch,
        newest first; a folder shared unchanged by several commits is reported once, under
        the newest of them."""
        head = self.head()
        if head is None:
            return []
        seen: set[tuple[bytes, str]] = set()
        out = []
        for entry in self.repo.get_walker(include=[_oid(head)]):
            commit = entry.commit
            out += [f"{commit.id.decode()[:10]}: {p}" for p in self._tree_problems(commit.tree, seen)]
        return out

    def _tree_problems(self, root: ObjectID, seen: set[tuple[bytes, str]]) -> list[str]:
        problems: list[str] = []
        stack: list[tuple[ObjectID, str]] = [(root, "")]
        while stack:  # a loop, not recursion: a stored tree may be deeper than Python's stack
            tree_id, prefix = stack.pop()
            if (tree_id, prefix) in seen:
                continue
            seen.add((tree_id, prefix))
            names: set[bytes] = set()
            for raw_name, mode, sha in parse_tree(self.repo.object_store[tree_id].as_raw_string(), 20):
                try:
                    path = prefix + raw_name.decode("utf-8")
                except UnicodeDecodeError:
                    problems.append(f"{prefix}{raw_name.decode('utf-8', 'replace')}: the name is not valid UTF-8 text")
                    continue
                if raw_name in names:
                    problems.append(f"{path}: the name appears twice in one folder")
                names.add(raw_name)
                problem = path_problem(path)
                if problem is None and mode not in (DIR_MODE, *STORED_FILE_MODES):
                    problem = f"not a plain file or folder (mode {mode:o}: a symlink or submodule)"
                if problem is not None:
                    problems.append(f"{path}: {problem}")
                elif mode == DIR_MODE and path.count("/") < MAX_DEPTH:
                    stack.append((ObjectID(sha), path + "/"))  # parse_tree yields hex ids, typed as bytes
        return sorted(problems)

    def archive(self, version: str | None, fmt: str, *, prefix: str, folder: str) -> bytes:
        """The files under `prefix` at `version`, in one folder named `folder`, as zip or tar.gz.

        Raises UnsafePath, and hands out nothing, when the version holds a path git's fsck
        would flag (a repository stored before those paths were refused at save)."""
        problems = self.tree_problems(version)
        if problems:
            shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
            raise UnsafePath(f"this version holds paths that are unsafe to unpack: {shown}")
        files = self.files(version, prefix=prefix)
        buf = io.BytesIO()
        stamp = self.repo[_oid(self.resolve(version))]
        assert isinstance(stamp, Commit)
        if fmt == "zip":
            with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
                for path, data in sorted(files.items()):
                    info = zipfile.ZipInfo(f"{folder}/{path}", date_time=time.gmtime(stamp.commit_time)[:6])
                    info.external_attr = 0o644 << 16
                    info.compress_type = zipfile.ZIP_DEFLATED
                    zf.writestr(info, data)
        elif fmt == "tar.gz":
            with tarfile.open(fileobj=buf, mode="w:gz") as tf:
                for path, data in sorted(files.items()):
                    member = tarfile.TarInfo(f"{folder}/{path}")
                    member.size = len(data)
                    member.mode = 0o644
                    member.mtime = stamp.commit_time
                    tf.addfile(member, io.BytesIO(data))
        else:
            raise StorageError(f"unknown archive format {fmt!r}; use zip or tar.gz")
        return buf.getvalue()


def _is_orphan(path: Path) -> bool:
    """A folder of a create that never made its first commit, untouched for ORPHAN_AGE_S."""
    try:
        if time.time() - path.stat().st_mtime < ORPHAN_AGE_S:
            return False
    except FileNotFoundError:
        return False
    try:
        Repo(str(path)).refs[BRANCH]
    except KeyError:
        return True  # a repository with no commit
    except NotGitRepository:  # a create that stopped before init left an empty folder
        return path.is_dir() and not any(path.iterdir())
    return False


def check_paths(paths: Mapping[str, bytes | None]) -> None:
    """Raise UnsafePath naming the first path `runtime.paths` refuses."""
    for path in paths:
        problem = path_problem(path)
        if problem is not None:
            raise UnsafePath(f"{shown(path)}: {problem}")
