"""`manage.py fsck_projects`: check every project's stored history as git's fsck would.

Prints `slug: commit: path: reason` for every path in any commit of any project that the
pack path rule (runtime/paths.py) refuses: `.git` and the other names git reads in every
spelling, names no filesystem holds, symlinks, submodules, duplicate entries. Exits 1
when it found any, so an operator (or a cron job) notices a repository written before
the rule, or by hand. Downloads of such a version are already refused."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from studio.projects.models import Project
from studio.projects.storage import PackRepo, StorageError


class Command(BaseCommand):
    help = "Check every project's stored history for paths a pack may not hold (exit 1 if any)."

    def handle(self, *args: Any, **options: Any) -> None:
        found = 0
        for project in Project.objects.order_by("slug"):
            try:
                problems = PackRepo(project.repo_path).fsck()
            except StorageError as exc:
                problems = [str(exc)]
            for problem in problems:
                self.stdout.write(f"{project.slug}: {problem}")
            found += len(problems)
        if found:
            raise CommandError(f"{found} problem(s) found")
        self.stdout.write("every project's history is clean")
