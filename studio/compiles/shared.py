"""What every compile job shares (starting, running, recovering): sending the task, a
compile's work dir. Below start.py, worker.py and recovery.py; imports none of
them, nor tasks.py."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from studio.compiles.models import Compile
from studio.compiles.settings import compile_root, setting
from studio.work import sweep as sweeping

if TYPE_CHECKING:
    from studio.projects.models import Project

S = Compile.Status
COMPILE_TASK = "compiles.execute_compile"  # studio.compiles.tasks.execute_compile


def send(compile_ids: Iterable[int]) -> None:
    """Send `compiles.execute_compile` for each id, by name (tasks.py imports this module
    through recovery.py), to PACKFORGE_COMPILE_QUEUE ("" = the default queue). Callers
    send after commit, so a worker never sees an uncommitted row."""
    sweeping.send(COMPILE_TASK, compile_ids, setting("PACKFORGE_COMPILE_QUEUE") or None)


def work_dir(compile_pk: int) -> Path:
    """The loop's work dir of one compile (`attempts/<n>/...`, compiler.loop.build): kept
    after the compile ends, so its attempts can be read and a resumed delivery continues."""
    return compile_root() / str(compile_pk)


def cache_dir(project: Project) -> Path:
    """The project's cache of target-model calls, which the worker hands the loop
    (`build(cache=...)`): one folder per project, `<compile root>/cache/project-<pk>`, so
    it lies on the storage the work dirs do (shared by every worker) and no work dir
    (named by its compile's id) can clash with it. It outlives compiles and workers: a
    later or resumed compile of the project gets the target's answers it already paid
    for from it. Not made here: the loop makes it when it writes its first entry."""
    return compile_root() / "cache" / f"project-{project.pk}"
