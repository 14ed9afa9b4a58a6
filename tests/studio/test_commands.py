"""The management commands that `scripts/start` runs on every start."""

from __future__ import annotations

import io
import logging
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client

from studio.accounts.models import Membership, Role
from studio.projects.management.commands.load_examples import example_names
from studio.projects.models import Project
from studio.projects.storage import PackRepo
from studio.projects.views import example_files


def run(command: str, *args: str) -> str:
    out = io.StringIO()
    call_command(command, *args, stdout=out, stderr=out)
    return out.getvalue()


def password_in(output: str) -> str:
    match = re.search(r"^admin password: (\S+)$", output, re.M)
    assert match, output
    return match.group(1)


def test_it_creates_one_admin_whose_printed_password_logs_in(
    db: None, caplog: pytest.LogCaptureFixture, settings: Any
) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # the production default
    caplog.set_level(logging.DEBUG)
    password = password_in(run("bootstrap_admin"))
    admin = User.objects.get()
    assert admin.username == "admin" and admin.is_superuser and admin.is_staff
    assert Client().login(username="admin", password=password)
    assert password not in admin.password and admin.password.startswith("pbkdf2_")
    assert password not in caplog.text


def test_it_prints_nothing_secret_and_creates_nothing_the_second_time(db: None) -> None:
    first = run("bootstrap_admin")
    hashed = User.objects.get().password
    second = run("bootstrap_admin")
    assert "password:" not in second and password_in(first) not in second
    assert "admin user: admin" in second
    assert User.objects.count() == 1 and User.objects.get().password == hashed


def test_it_names_the_admin_it_was_asked_for(db: None) -> None:
    password = password_in(run("bootstrap_admin", "--username", "root"))
    assert Client().login(username="root", password=password)


def test_it_refuses_to_promote_an_existing_non_admin(db: None) -> None:
    User.objects.create_user("admin", password="x" * 20)
    with pytest.raises(CommandError, match="exists and is not an admin"):
        run("bootstrap_admin")
    assert not User.objects.filter(is_superuser=True).exists()


def test_it_loads_one_project_per_example_pack_with_its_files_in_git(db: None) -> None:
    run("bootstrap_admin")
    admin = User.objects.get()
    output = run("load_examples")
    names = example_names()
    assert len(names) >= 5 and "support_triage" in names
    assert sorted(Project.objects.values_list("slug", flat=True)) == names
    assert f"loaded {len(names)}" in output
    for name in names:
        project = Project.objects.get(slug=name)
        repo = PackRepo(project.repo_path)
        assert repo.files(prefix="pack/") == example_files(name)
        assert project.head == repo.head() and len(repo.log()) == 1
        assert Membership.objects.get(project=project).user == admin
        assert Membership.objects.get(project=project).role == Role.AUTHOR


def test_it_skips_examples_that_are_already_loaded(db: None) -> None:
    run("bootstrap_admin")
    run("load_examples")
    heads = dict(Project.objects.values_list("slug", "head"))
    output = run("load_examples")
    assert dict(Project.objects.values_list("slug", "head")) == heads
    assert "loaded" not in output and f"{len(heads)} already there" in output
    assert all(len(PackRepo(p.repo_path).log()) == 1 for p in Project.objects.all())


def test_it_refuses_to_load_examples_without_an_admin(db: None) -> None:
    with pytest.raises(CommandError, match="bootstrap_admin"):
        run("load_examples")
    assert not Project.objects.exists()
