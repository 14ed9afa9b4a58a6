from django.apps import AppConfig


class Config(AppConfig):
    name = "studio.projects"
    label = "projects"
    default_auto_field = "django.db.models.BigAutoField"
