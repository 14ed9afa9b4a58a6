"""Model endpoints: where runs and evals send their model calls. Keys are never stored:
an endpoint names the environment variable that holds its key."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.utils import timezone

env_name = RegexValidator(r"^[A-Z_][A-Z0-9_]{0,63}$", "an environment variable name, like PROVIDER_API_KEY")
# The studio's own secrets and settings: a key variable naming one of these would send it
# to whatever server the endpoint's URL names.
not_a_studio_setting = RegexValidator(
    r"^(SECRET_KEY|DATABASE_URL|REDIS_URL|PACKFORGE_.*|DJANGO_.*|CELERY_.*|PATH|HOME)$",
    inverse_match=True,
    message="this variable belongs to the studio itself; name the variable that holds the endpoint's key",
)


class Endpoint(models.Model):
    name = models.CharField(max_length=100, unique=True)
    spec = models.CharField(max_length=500, help_text="openai:URL#MODEL, fake:FILE or sim:...")
    key_env = models.CharField(max_length=64, blank=True, validators=[env_name, not_a_studio_setting])
    price_in = models.DecimalField(
        max_digits=10,
        decimal_places=4,
        default=0,
        validators=[MinValueValidator(0)],
        help_text="USD per million input tokens",
    )
    price_out = models.DecimalField(
        max_digits=10,
        decimal_places=4,
        default=0,
        validators=[MinValueValidator(0)],
        help_text="USD per million output tokens",
    )
    concurrency = models.PositiveIntegerField(default=4, validators=[MinValueValidator(1)])
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    last_check = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
