"""Which environment variables an endpoint may name as its key (`key_env`).

The studio sends the value of an endpoint's key variable as a bearer token to whatever
URL the endpoint names, so naming a variable is reading it out: `key_env=PWD`, or the
name of any secret the web or worker process holds, handed it to that server. So a key
variable must be on the operator's allowlist, `settings.ENDPOINT_KEY_VARS`
(`PACKFORGE_ENDPOINT_KEY_VARS`, comma-separated; an entry is a name, or a prefix ending
in `*`; default `PACKFORGE_KEY_*`), and never one of the studio's own settings, whatever
the allowlist says. The rule is checked when an endpoint is created or edited (the
model's validator, so the page and the API alike) and again whenever one is opened
(`studio.endpoints.backends.config_for`), so a row saved before the rule, or under a
wider allowlist, is refused when it is used. docs/endpoints.md, "Key variables"."""

from __future__ import annotations

import re

from django.conf import settings
from django.core.exceptions import ValidationError

__all__ = ["DEFAULT_KEY_VARS", "allowed_key_env", "key_env_problem"]

DEFAULT_KEY_VARS = ["PACKFORGE_KEY_*"]

# The studio's own secrets and settings: never a key, even on a wide allowlist.
_STUDIO_OWN = re.compile(r"^(SECRET_KEY|DATABASE_URL|REDIS_URL|PACKFORGE_(?!KEY_).*|DJANGO_.*|CELERY_.*|PATH|HOME)$")


def _allowlist() -> list[str]:
    return list(getattr(settings, "ENDPOINT_KEY_VARS", DEFAULT_KEY_VARS))


def _on(name: str, entry: str) -> bool:
    return name.startswith(entry[:-1]) if entry.endswith("*") else name == entry


def key_env_problem(name: str) -> str | None:
    """Why `name` may not be an endpoint's key variable, or None (an empty name: no key)."""
    if not name:
        return None
    if _STUDIO_OWN.match(name):
        return f"{name} belongs to the studio itself; name the variable that holds the endpoint's key"
    allowed = _allowlist()
    if any(_on(name, entry) for entry in allowed):
        return None
    return (
        f"key variable {name} is not on the studio's allowlist ({', '.join(allowed) or 'empty'}; "
        "the operator sets it with PACKFORGE_ENDPOINT_KEY_VARS): put the key in a variable named "
        "like PACKFORGE_KEY_OPENAI"
    )


def allowed_key_env(value: str) -> None:
    """The model field's validator: `key_env_problem` as a ValidationError."""
    problem = key_env_problem(value)
    if problem:
        raise ValidationError(problem)
