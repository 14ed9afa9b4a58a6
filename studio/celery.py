"""The Celery app. Tasks are thin: ids in, one call into an execute module, rows out."""

from __future__ import annotations

import os

from celery import Celery

from studio.work import kombu_redis

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
kombu_redis.install()  # a Redis restart must not end a worker (studio/work/kombu_redis.py)

app = Celery("studio")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
