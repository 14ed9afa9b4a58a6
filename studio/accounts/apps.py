from django.apps import AppConfig


class Config(AppConfig):
    name = "studio.accounts"
    label = "accounts"
    default_auto_field = "django.db.models.BigAutoField"
