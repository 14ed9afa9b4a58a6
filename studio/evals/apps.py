from django.apps import AppConfig


class Config(AppConfig):
    name = "studio.evals"
    label = "evals"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register the eval tasks in every process (web too): cases are sent by the task's
        # name (studio.evals.shared), and a registered task honours task_always_eager.
        from studio.evals import tasks  # noqa: F401
