"""The one way the studio loads a pack at a version: resolve the version in the
project's git repository, write its files into a folder, load them with the host's
tools (docs/invariants.md, 5: the pack reaches only those), and say why it cannot run.

Every reason a pack cannot run in the studio is one `PackUnrunnable`, carrying the
reasons: the version does not exist, the tool registry does not load, the pack does
not load, the pack calls tools the studio has none of, the pack names no model, or its
own model is one the studio refuses (`own_model_problem`). Try-it runs, evals and the
pages all go through here."""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from runtime import (
    BadSpec,
    FakeConfig,
    Pack,
    PackInvalid,
    Registry,
    SimConfig,
    load_pack,
    pack_file,
    parse_backend_spec,
    path_problem,
)
from studio.errors import Refused
from studio.host_tools import registry_broken, scorer_registry, scorers_problem, tool_registry, tools_problem
from studio.projects.models import Project
from studio.projects.storage import PackRepo, StorageError

PACK_PREFIX = "pack/"  # where a project's pack lives in its repository
NO_MODEL = "this pack's manifest names no model; choose an endpoint"


class PackUnrunnable(Refused):
    """The pack at a version cannot run in the studio; `reasons` says why, each with
    what to do. str() joins them."""

    def __init__(self, reasons: list[str]) -> None:
        self.reasons = list(reasons)
        super().__init__("; ".join(self.reasons))


@dataclass
class LoadedPack:
    """A pack loaded at `sha` with the host's `tools` (None: the studio has no registry).
    `problems` are why it cannot run as loaded (empty: it can); `ensure_runnable`
    raises them."""

    sha: str
    pack: Pack
    tools: Registry | None
    problems: list[str]

    def ensure_runnable(self) -> LoadedPack:
        if self.problems:
            raise PackUnrunnable(self.problems)
        return self


def materialize(files: dict[str, bytes], root: Path) -> Path:
    """Write `files` (paths relative to the pack root) under `root`."""
    for name, data in files.items():
        problem = path_problem(name)  # a repository edited outside the studio is not trusted
        if problem is not None:
            raise PackUnrunnable([f"{name}: {problem}"])
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return root


_folders_lock = threading.Lock()
_folders: dict[tuple[int, str], Path] = {}
_folders_root: list[Path] = []


def version_folder(project: Project | int, sha: str) -> Path:
    """The pack of `project` at commit `sha`, written once per process into a folder kept
    until the process exits (a worker's evals and deployments load it from there, and a
    scripted model reads its file there). `forget_folders` drops the index (tests)."""
    pk = project if isinstance(project, int) else project.pk
    with _folders_lock:
        if (pk, sha) in _folders:
            return _folders[(pk, sha)]
        if not _folders_root:
            root = Path(tempfile.mkdtemp(prefix="pf-packs-"))
            atexit.register(shutil.rmtree, root, True)
            _folders_root.append(root)
        folder = _folders_root[0] / f"{pk}-{sha}"
        owner = project if isinstance(project, Project) else Project.objects.get(pk=pk)
        _, files = read_version(owner, sha)
        shutil.rmtree(folder, ignore_errors=True)
        materialize(files, folder)
        _folders[(pk, sha)] = folder
        return folder


def forget_folders() -> None:
    with _folders_lock:
        _folders.clear()


def read_version(project: Project, version: str | None) -> tuple[str, dict[str, bytes]]:
    """The commit `version` names (None: the newest) and the pack's files at it."""
    repo = PackRepo(project.repo_path)
    try:
        sha = repo.resolve(version or None)
        return sha, repo.files(sha, prefix=PACK_PREFIX)
    except StorageError as exc:
        raise PackUnrunnable([str(exc)]) from None


def host_tools() -> Registry | None:
    """The host's tools (None: no registry); PackUnrunnable when the registry is broken."""
    try:
        return tool_registry()
    except BadSpec as exc:
        raise PackUnrunnable([registry_broken(exc)]) from None


def load_folder(root: Path, sha: str, *, own_model: bool) -> LoadedPack:
    """Load the pack written under `root` with the host's tools. `own_model`: the run
    will use the manifest's model (so there must be one, and one the studio accepts).
    Raises PackUnrunnable when it does not load; other problems are in `problems`."""
    tools = host_tools()
    try:
        scorers = scorer_registry()
    except BadSpec as exc:
        raise PackUnrunnable([f"the studio's scorer registry (PACKFORGE_SCORERS) does not load: {exc}"]) from None
    try:
        pack = load_pack(root, tools=set(tools) if tools is not None else None, scorers=scorers)
    except PackInvalid as exc:
        shown = "; ".join(str(issue) for issue in exc.issues[:3])
        more = f" (and {len(exc.issues) - 3} more)" if len(exc.issues) > 3 else ""
        raise PackUnrunnable([f"the pack at {sha[:10]} does not load: {shown}{more}"]) from None
    problems = run_problems(pack, tools, own_model=own_model)
    if (unscored := scorers_problem(pack, scorers)) is not None:
        problems.append(unscored)
    return LoadedPack(sha, pack, tools, problems)


def load_version(project: Project, version: str | None, root: Path, *, own_model: bool) -> LoadedPack:
    """Resolve `version`, write the pack under `root` and load it (see load_folder)."""
    sha, files = read_version(project, version)
    return load_folder(materialize(files, root), sha, own_model=own_model)


@contextmanager
def loaded(project: Project, version: str | None, *, own_model: bool) -> Iterator[LoadedPack]:
    """load_version into a temporary folder, removed on exit."""
    with tempfile.TemporaryDirectory(prefix="pf-pack-") as tmp:
        yield load_version(project, version, Path(tmp), own_model=own_model)


def run_problems(pack: Pack, tools: Registry | None, *, own_model: bool) -> list[str]:
    """Why a loaded pack cannot run in the studio (empty: it can)."""
    problems = []
    if (missing := tools_problem(pack, tools)) is not None:
        problems.append(missing)
    if own_model:
        if not pack.model:
            problems.append(NO_MODEL)
        elif (refused := own_model_problem(pack)) is not None:
            problems.append(refused)
    return problems


def own_model_problem(pack: Pack) -> str | None:
    """Why the studio will not run this pack on its manifest's own model, or None.

    In the studio a pack's own model must be a scripted model inside the pack. A pack is
    written by any author, and an `openai:` spec in it could name any server and any
    environment variable as its key (the studio's SECRET_KEY, say); real servers are
    endpoints, set up by staff. A scripted file outside the pack would read the server's
    disk."""
    spec = pack.model or ""
    if spec.partition(":")[0] not in ("fake", "sim"):
        return (
            f"the manifest's model {spec!r} is not a scripted model; in the studio a pack's own model must be "
            "fake:FILE or sim:... inside the pack; run it on a real server through an endpoint"
        )
    try:
        config = parse_backend_spec(spec)
    except BadSpec as exc:
        return f"the manifest's model {spec!r} is not valid: {exc}"
    path = (
        config.file if isinstance(config, FakeConfig) else (config.base or "") if isinstance(config, SimConfig) else ""
    )
    # The runtime opens the pack's own model with the same rule (runtime.pack_file):
    # inside the materialised pack only, never the worker's current directory, so no
    # message here or there says whether a file of the server exists.
    try:
        file = pack_file(path, Path(pack.root))
    except BadSpec:
        return f"the manifest's model {spec!r} names a file outside the pack; scripted models live in the pack"
    if not file.is_file():
        return f"the manifest's model {spec!r} names {path!r}, which is not a file of the pack"
    return None
