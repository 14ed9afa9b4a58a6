from django.apps import AppConfig


class Config(AppConfig):
    name = "studio.review"
    label = "review"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from studio.review import items

        items.connect()
