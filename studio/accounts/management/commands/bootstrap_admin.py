"""`manage.py bootstrap_admin`: the first admin account, made once.

The password is generated, printed once on stdout, and stored only as Django's hash; a
later call finds the admin and prints its username, never a secret."""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction


class Command(BaseCommand):
    help = "Create an admin account if there is none, and print its generated password once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin", help="name of the admin to create (default: admin)")
        parser.add_argument("--email", default="", help="its email address (optional)")

    def handle(self, *args: Any, username: str, email: str, **options: Any) -> None:
        User = get_user_model()
        with transaction.atomic():
            existing = User.objects.filter(is_superuser=True).order_by("pk").first()
            if existing is not None:
                name = existing.get_username()
                self.stdout.write(
                    f"admin user: {name} (exists; its password was shown when it was made; "
                    f"reset it with: manage.py changepassword {name})"
                )
                return
            if User.objects.filter(**{User.USERNAME_FIELD: username}).exists():
                raise CommandError(
                    f"a user named {username!r} exists and is not an admin; "
                    f"give another --username, or make that user a superuser"
                )
            password = secrets.token_urlsafe(18)
            User.objects.create_superuser(username, email, password)
        self.stdout.write(f"admin user: {username}")
        self.stdout.write(f"admin password: {password}")
        self.stdout.write(
            f"  (shown this once and stored only as a hash; change it with: manage.py changepassword {username})"
        )
