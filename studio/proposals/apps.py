from django.apps import AppConfig


class Config(AppConfig):
    name = "studio.proposals"
    label = "proposals"
    default_auto_field = "django.db.models.BigAutoField"
