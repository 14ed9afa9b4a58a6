"""The studio's URLs, its error handlers, and one view that fails: a 500 on demand."""

from django.http import HttpRequest, HttpResponse
from django.urls import path

from studio.urls import handler400, handler403, handler404, handler500
from studio.urls import urlpatterns as studio_patterns

__all__ = ["handler400", "handler403", "handler404", "handler500", "urlpatterns"]


def fails(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("SECRET-INTERNALS in a traceback")


urlpatterns = [path("fails/", fails), path("api/fails", fails), *studio_patterns]
