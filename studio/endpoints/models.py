"""Model endpoints: where runs and evals send their model calls. Keys are never stored:
an endpoint names the environment variable that holds its key."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.utils import timezone

from studio.endpoints.keys import allowed_key_env

env_name = RegexValidator(r"^[A-Z_][A-Z0-9_]{0,63}$", "an environment variable name, like PACKFORGE_KEY_OPENAI")


class Endpoint(models.Model):
    name = models.CharField(max_length=100, unique=True)
    spec = models.CharField(max_length=500, help_text="openai:URL#MODEL, fake:FILE or sim:...")
    key_env = models.CharField(max_length=64, blank=True, validators=[env_name, allowed_key_env])
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
