"""The one NinjaAPI: every app's Router is gathered here. OpenAPI at /api/docs.

Every operation is authenticated (a bearer token, or the session with CSRF); errors
use the {"detail": ...} shape (studio/errors.py)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from ninja import NinjaAPI

from studio import errors
from studio.accounts.auth import API_AUTH

api = NinjaAPI(
    title="Packforge studio",
    version="1",
    urls_namespace="api",
    auth=API_AUTH,
    docs_decorator=login_required,
    parser=errors.StudioParser(),
)
errors.install(api)

api.add_router("/projects", "studio.projects.api.router")
api.add_router("/projects", "studio.projects.spec_api.router")
api.add_router("/projects", "studio.proposals.api.router")
api.add_router("/endpoints", "studio.endpoints.api.router")
# GET /api/runs (every run) shares the path of POST /api/runs (start a try-it run), so
# studio.runlist.api adds its operation to the runs router rather than mounting its own.
api.add_router("/runs", "studio.runlist.api.router")
api.add_router("/tokens", "studio.accounts.api.router")
# results first: its /compare, /matrix and /evalset-cases come before evals.api's /{eval_id}
api.add_router("/evals", "studio.evals.results_api.router")
api.add_router("/evals", "studio.evals.api.router")
api.add_router("/compiles", "studio.compiles.api.router")
api.add_router("/deployments", "studio.deployments.api.router")
api.add_router("/deployments", "studio.deployments.runs_api.router")
api.add_router("/review", "studio.review.api.router")
api.add_router("/users", "studio.accounts.members_api.users_router")
api.add_router("/projects", "studio.accounts.members_api.members_router")
