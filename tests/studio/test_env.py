"""Settings from the environment: strict parsing, clear errors naming the variable."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from studio.env import database_from_url, env_bool, env_int, secret_key


def test_it_parses_sqlite_and_postgres_urls(tmp_path: Path) -> None:
    assert database_from_url("sqlite:///var/x.sqlite3", tmp_path)["NAME"] == str(tmp_path / "var" / "x.sqlite3")
    assert database_from_url(f"sqlite:///{tmp_path}/y.sqlite3", Path("/elsewhere"))["NAME"] == f"{tmp_path}/y.sqlite3"
    pg = database_from_url("postgres://pf:s%40cret@db.local:5433/packforge?sslmode=require", tmp_path)
    assert (pg["ENGINE"], pg["USER"], pg["PASSWORD"], pg["HOST"], pg["PORT"], pg["NAME"]) == (
        "django.db.backends.postgresql",
        "pf",
        "s@cret",
        "db.local",
        "5433",
        "packforge",
    )
    assert pg["OPTIONS"] == {"sslmode": "require"}


@pytest.mark.parametrize(
    "url, message",
    [
        ("mysql://x/y", "scheme 'mysql'"),
        ("postgres://host-only", "expected postgres://"),
        ("sqlite://", "expected sqlite:///path"),
    ],
)
def test_it_refuses_a_bad_database_url(tmp_path: Path, url: str, message: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=message):
        database_from_url(url, tmp_path)


def test_it_parses_booleans_and_numbers_strictly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PF_FLAG", "yes")
    assert env_bool("PF_FLAG", False) is True
    monkeypatch.setenv("PF_FLAG", "perhaps")
    with pytest.raises(ImproperlyConfigured, match="PF_FLAG='perhaps': expected true or false"):
        env_bool("PF_FLAG", False)
    monkeypatch.setenv("PF_N", "12")
    assert env_int("PF_N", 1) == 12
    monkeypatch.setenv("PF_N", "twelve")
    with pytest.raises(ImproperlyConfigured, match="PF_N='twelve': expected a whole number"):
        env_int("PF_N", 1)
    monkeypatch.setenv("PF_N", "0")
    with pytest.raises(ImproperlyConfigured, match="must be at least 1"):
        env_int("PF_N", 5, minimum=1)


def test_it_generates_a_secret_key_once_and_keeps_it_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SECRET_KEY", raising=False)
    first = secret_key(tmp_path / "var")
    assert len(first) >= 50 and secret_key(tmp_path / "var") == first
    assert (tmp_path / "var" / "secret_key").stat().st_mode & 0o777 == 0o600
    monkeypatch.setenv("SECRET_KEY", "short")
    with pytest.raises(ImproperlyConfigured, match="at least 32 characters"):
        secret_key(tmp_path / "var")
