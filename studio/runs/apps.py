from django.apps import AppConfig


class Config(AppConfig):
    name = "studio.runs"
    label = "runs"
    default_auto_field = "django.db.models.BigAutoField"
