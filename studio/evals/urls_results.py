"""The result pages, mounted at evals/ by one line in studio/urls.py, beside (and on paths
distinct from) the live eval pages in studio/evals/urls.py."""

from django.urls import path

from studio.evals import views_results as views

urlpatterns = [
    path("<int:eval_id>/summary", views.eval_summary, name="evals-summary"),
    path("<int:eval_id>/blame", views.eval_blame, name="evals-blame"),
    path("<int:eval_id>/coverage", views.eval_coverage, name="evals-coverage"),
    path("<int:eval_id>/tiers", views.eval_tiers, name="evals-tiers"),
    path("<int:eval_id>/cost", views.eval_cost, name="evals-cost"),
    path("<int:eval_id>/cases/<path:case_id>/<int:repeat>", views.eval_case, name="evals-case-trace"),
    path("<int:eval_id>/baseline", views.eval_mark_baseline, name="evals-mark-baseline"),
    path("compare", views.eval_compare, name="evals-compare"),
    path("history/<slug:slug>", views.eval_history, name="evals-history"),
]
