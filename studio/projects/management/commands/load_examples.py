"""`manage.py load_examples`: every example pack (packs/<name>/) as a project.

Idempotent: a pack whose project exists is skipped, so it runs on every start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from studio.projects.models import Project, create_project
from studio.projects.specs import example_spec_files
from studio.projects.storage import StorageError
from studio.projects.views import example_files


def example_names() -> list[str]:
    root = Path(settings.EXAMPLE_PACKS)
    return sorted(p.name for p in root.iterdir() if (p / "manifest.yaml").is_file()) if root.is_dir() else []


def _description(name: str) -> str:
    try:
        manifest = yaml.safe_load((Path(settings.EXAMPLE_PACKS) / name / "manifest.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return ""
    text = manifest.get("description", "") if isinstance(manifest, dict) else ""
    return " ".join(str(text).split())


class Command(BaseCommand):
    help = "Load every example pack under packs/ as a project owned by the admin; skip those that exist."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--owner", help="username of the owner (default: the first admin)")

    def handle(self, *args: Any, owner: str | None, **options: Any) -> None:
        User = get_user_model()
        if owner:
            user = User.objects.filter(**{User.USERNAME_FIELD: owner}).first()
            if user is None:
                raise CommandError(f"no user named {owner!r}")
        else:
            user = User.objects.filter(is_superuser=True).order_by("pk").first()
            if user is None:
                raise CommandError("no admin account to own the examples; run manage.py bootstrap_admin first")
        made, skipped = [], []
        for name in example_names():
            slug = name.lower()
            if Project.objects.filter(slug=slug).exists():
                skipped.append(slug)
                continue
            try:
                create_project(
                    slug=slug,
                    name=name.replace("_", " ").capitalize(),
                    owner=user,
                    pack_files=example_files(name),
                    spec_files=example_spec_files(name),
                    message=f"Create from example {name}",
                    description=_description(name),
                )
            except StorageError as exc:
                # A repository without its row: a start that died half way. Leave the
                # files for a person to look at rather than delete them.
                self.stderr.write(f"example {name}: not loaded: {exc}")
                continue
            made.append(slug)
        parts = []
        if made:
            parts.append(f"loaded {len(made)} ({', '.join(made)})")
        if skipped:
            parts.append(f"{len(skipped)} already there")
        self.stdout.write("example packs: " + ("; ".join(parts) if parts else "none found"))
