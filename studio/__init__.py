"""The Packforge studio: the only package that knows Django."""

from studio.celery import app as celery_app

__all__ = ["celery_app"]
