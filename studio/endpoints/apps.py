from django.apps import AppConfig


class Config(AppConfig):
    name = "studio.endpoints"
    label = "endpoints"
    default_auto_field = "django.db.models.BigAutoField"
