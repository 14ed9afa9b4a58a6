from typing import Any

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from studio.api import api
from studio.deployments.mcp import deployment_mcp
from studio.evals import urls as evals_urls
from studio.evals.views.cases import all_evals
from studio.ops.views import metrics
from studio.runlist import views as runlist_views
from studio.runs import urls as runs_urls


def _public(patterns: list[Any]) -> list[Any]:
    """The API authenticates each operation itself (session + CSRF, or a bearer token) and
    answers 401 in its own {"detail": ...} shape, so the login redirect stays off it."""
    for pattern in patterns:
        if hasattr(pattern, "url_patterns"):
            _public(pattern.url_patterns)
        else:
            pattern.callback.login_required = False
    return patterns


handler400 = "studio.errors.bad_request"
handler403 = "studio.errors.permission_denied"
handler404 = "studio.errors.page_not_found"
handler500 = "studio.errors.server_error"

urlpatterns = [
    path("login/", login_not_required(auth_views.LoginView.as_view(template_name="accounts/login.html")), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("metrics", metrics, name="ops-metrics"),
    # Pages link the SVG icon; this is for what asks the conventional place (/api/docs, a feed reader).
    path("favicon.ico", login_not_required(RedirectView.as_view(url=static("studio/favicon.svg"))), name="favicon"),
    path("api/", (_public(api.urls[0]), api.urls[1], api.urls[2])),
    path("mcp/deployments/<slug:name>", deployment_mcp, name="deployments-mcp"),  # docs/tools.md, MCP
    path("endpoints/", include("studio.endpoints.urls")),
    path("review/", include("studio.review.urls")),
    path("evals/", all_evals, name="evals-all"),  # across projects
    path("runs/", runlist_views.all_runs, name="runs-all"),  # try-it and served, of every project
    path("p/<slug:slug>/runs/", include("studio.runs.urls")),
    path("p/<slug:slug>/evals/", include("studio.evals.urls")),
    path("p/<slug:slug>/compiles/", include("studio.compiles.urls")),
    path("p/<slug:slug>/deployments/", include("studio.deployments.urls")),
    path("p/<slug:slug>/proposals/", include("studio.proposals.urls")),
    path("", include("studio.accounts.urls")),
    path("", include("studio.projects.urls")),
    # the URLs before every project page lived under /p/<slug>/: redirects (docs/studio.md)
    path("runs/", include(runs_urls.moved_patterns)),
    path("evals/", include(evals_urls.moved_patterns)),
]
