"""Strict settings from the environment: a bad value raises ImproperlyConfigured that
names the variable and says what is expected."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name}={raw!r}: expected true or false")


def env_int(name: str, default: int, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r}: expected a whole number") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name}={value}: must be at least {minimum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def database_from_url(url: str, base_dir: Path) -> dict[str, Any]:
    """`sqlite:///relative/or/absolute.sqlite3` or `postgres://user:pass@host:port/name`."""
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        path = unquote(parts.path.removeprefix("/")) if parts.netloc == "" else ""
        if not path:
            raise ImproperlyConfigured(f"DATABASE_URL={url!r}: expected sqlite:///path/to/db.sqlite3")
        file = Path(path) if Path(path).is_absolute() else base_dir / path
        file.parent.mkdir(parents=True, exist_ok=True)
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(file),
            "OPTIONS": {
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
            },
            # One connection per process (thread), kept: opening one (the file, the WAL
            # pragma, Django's SQL functions) on every request and every task cost 3.6 ms
            # of a served run's added latency (docs/serving.md, "Performance").
            "CONN_MAX_AGE": None,
            "CONN_HEALTH_CHECKS": True,
        }
    if parts.scheme in ("postgres", "postgresql"):
        name = unquote(parts.path.removeprefix("/"))
        if not name or not parts.hostname:
            raise ImproperlyConfigured("DATABASE_URL: expected postgres://user:password@host:port/dbname")
        options = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": name,
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname,
            "PORT": str(parts.port or 5432),
            "OPTIONS": options,
            "CONN_MAX_AGE": 60,
            "CONN_HEALTH_CHECKS": True,
        }
    raise ImproperlyConfigured(
        f"DATABASE_URL has scheme {parts.scheme!r}; use sqlite:///path or postgres://user:pass@host/db"
    )


def secret_key(var_dir: Path) -> str:
    """SECRET_KEY from the environment, else generated once into var/secret_key."""
    from_env = os.environ.get("SECRET_KEY")
    if from_env:
        if len(from_env) < 32:
            raise ImproperlyConfigured("SECRET_KEY must be at least 32 characters")
        return from_env
    path = var_dir / "secret_key"
    if not path.exists():
        var_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(50))
    return path.read_text().strip()


# A unix socket's path must fit in sockaddr_un (108 bytes on Linux, with its NUL).
_SOCKET_PATH_MAX = 100


def embedded_redis_socket(var_dir: Path) -> Path:
    """Where `scripts/start` runs its own Redis: `<var>/redis/redis.sock`, or, when that
    path is too long for a unix socket, a folder of this user's under the system's temp
    folder named after the var folder (so two studios on two var folders never share)."""
    path = Path(var_dir).resolve() / "redis" / "redis.sock"
    if len(os.fsencode(path)) <= _SOCKET_PATH_MAX:
        return path
    import hashlib
    import tempfile

    digest = hashlib.sha256(os.fsencode(path)).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"packforge-{os.getuid()}-{digest}" / "redis.sock"


def celery_broker_url(redis_url: str) -> str:
    """Celery's spelling of a REDIS_URL: kombu names a unix socket `redis+socket:///path`
    where redis-py (and REDIS_URL) say `unix:///path`; the database number moves from
    `?db=N` to `?virtual_host=N`."""
    parts = urlsplit(redis_url)
    if parts.scheme != "unix":
        return redis_url
    query = parse_qs(parts.query)
    db = query.pop("db", ["0"])[-1]
    if not parts.path or not db.isdecimal():
        raise ImproperlyConfigured(f"REDIS_URL={redis_url!r}: expected unix:///path/to/redis.sock[?db=N]")
    auth = f"{parts.netloc}@" if "@" in parts.netloc else ""
    rest = "&".join(f"{k}={v[-1]}" for k, v in query.items())
    return f"redis+socket://{auth}{parts.path}?virtual_host={db}" + (f"&{rest}" if rest else "")
