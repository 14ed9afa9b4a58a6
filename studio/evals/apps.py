from django.apps import AppConfig


class Config(AppConfig):
    name = "studio.evals"
    label = "evals"
    default_auto_field = "django.db.models.BigAutoField"
