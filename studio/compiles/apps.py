from django.apps import AppConfig


class Config(AppConfig):
    name = "studio.compiles"
    label = "compiles"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register the compile task in every process (web too): a sweep sends it by name,
        # and a registered task honours task_always_eager.
        from studio.compiles import tasks  # noqa: F401
