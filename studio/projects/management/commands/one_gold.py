"""`manage.py one_gold [--dry-run]`: fold every project's old `spec/gold.jsonl` into its
pack's `evalset.jsonl` (studio.projects.gold), one commit per project that has one, and
print what each lost nothing of: cases added, cases both files held differently (the old
gold's kept under a new id). Projects without the old file are left alone, so it is safe
to run at every start (scripts/start does)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from studio.projects.gold import EVALSET, OLD_GOLD, GoldMerge, describe, merge_gold
from studio.projects.models import Project
from studio.projects.storage import PackRepo, StorageError


def move_project(project: Project, *, dry_run: bool = False) -> GoldMerge | None:
    """Fold the project's `spec/gold.jsonl` into its evalset as one commit on main (None
    when it has no such file). A dry run reports what it would do and writes nothing."""
    repo = PackRepo(project.repo_path)
    head = repo.head()
    if head is None:
        return None
    files = repo.files(head)
    if OLD_GOLD not in files:
        return None
    merged = merge_gold(files.get(EVALSET), files[OLD_GOLD])
    if dry_run:
        return merged
    changes: dict[str, bytes | None] = {OLD_GOLD: None}
    if merged.data != files.get(EVALSET, b""):
        changes[EVALSET] = merged.data
    sha = repo.save(
        changes,
        base=head,
        author="Packforge",
        email="",
        message="One gold: spec/gold.jsonl folded into pack/evalset.jsonl\n\n" + describe(merged),
    )
    Project.objects.filter(pk=project.pk).update(head=sha)
    return merged


class Command(BaseCommand):
    help = "Fold each project's spec/gold.jsonl into its pack's evalset.jsonl (one gold per project)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="report, write nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        moved = 0
        for project in Project.objects.order_by("slug"):
            try:
                merged = move_project(project, dry_run=options["dry_run"])
            except StorageError as exc:
                self.stderr.write(f"{project.slug}: not moved: {exc}")
                continue
            except UnicodeDecodeError:  # left for a person: rewriting would change its bytes
                self.stderr.write(f"{project.slug}: not moved: its evalset or old gold is not UTF-8 text")
                continue
            if merged is not None:
                moved += 1
                self.stdout.write(
                    f"{project.slug}: {'would fold' if options['dry_run'] else 'folded'}: {describe(merged)}"
                )
        if moved or options["verbosity"] > 1:
            self.stdout.write(f"one gold: {moved} project(s) {'to move' if options['dry_run'] else 'moved'}")
