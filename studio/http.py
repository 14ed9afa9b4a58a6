"""The request type the studio's page views receive, for the type checker.

Every page view sits behind `LoginRequiredMiddleware` (only the login page is marked
`login_not_required`, and it is Django's own view), so by the time a view runs its
`request.user` is a signed-in `User`; `HtmxMiddleware` sets `request.htmx` on every
request. Django's `HttpRequest` knows neither, so views and the helpers they call take
`StudioRequest` instead (the pattern django-stubs and django-htmx document). It is never
instantiated: at runtime the view gets Django's request object, unchanged. The API's
operations take it too: the NinjaAPI's `auth=API_AUTH` (studio/accounts/auth.py) refuses
anyone not signed in by session or token before an operation runs, and leaves the
token's `User` on `request.user`."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails

__all__ = ["StudioRequest"]


class StudioRequest(HttpRequest):
    user: User
    htmx: HtmxDetails
