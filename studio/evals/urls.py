"""The live eval pages (start, progress, cancel), mounted at evals/ by one line in
studio/urls.py; the result pages are studio/evals/urls_results.py."""

from django.urls import path

from studio.evals import views_run

urlpatterns = [
    path("new", views_run.eval_new, name="evals-new"),
    path("<int:eval_id>/", views_run.eval_detail, name="evals-detail"),
    path("<int:eval_id>/cancel", views_run.eval_cancel, name="evals-cancel"),
]
