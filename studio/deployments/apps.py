from django.apps import AppConfig


class Config(AppConfig):
    name = "studio.deployments"
    label = "deployments"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register the tasks in every process (web too): runs and webhooks are sent by
        # the task's name, and a registered task honours task_always_eager.
        from studio.deployments import tasks  # noqa: F401
