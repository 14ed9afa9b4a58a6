from django.apps import AppConfig


class Config(AppConfig):
    name = "studio.deployments"
    label = "deployments"
    default_auto_field = "django.db.models.BigAutoField"
