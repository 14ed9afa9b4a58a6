"""The studio's URLs, its error handlers, and views that fail: a 500 on demand, and
refusals no view catches (a page's and an htmx partial's, and a server's fault)."""

from django.http import HttpRequest, HttpResponse
from django.urls import path

from studio.projects.branches import MergeConflict
from studio.projects.storage import StorageError
from studio.urls import handler400, handler403, handler404, handler500
from studio.urls import urlpatterns as studio_patterns

__all__ = ["handler400", "handler403", "handler404", "handler500", "urlpatterns"]


def fails(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("SECRET-INTERNALS in a traceback")


def refuses(request: HttpRequest) -> HttpResponse:
    raise MergeConflict(["pack/prompts/a.txt"], [])


def refuses_bad(request: HttpRequest) -> HttpResponse:
    raise StorageError("no version cafe")


def storage_fault(request: HttpRequest) -> HttpResponse:
    raise StorageError("SECRET-INTERNALS: the project's repository is missing", status=500)


urlpatterns = [
    path("fails/", fails),
    path("api/fails", fails),
    path("refuses/", refuses),
    path("refuses-bad/", refuses_bad),
    path("api/refuses", refuses),
    path("storage-fault/", storage_fault),
    *studio_patterns,
]
