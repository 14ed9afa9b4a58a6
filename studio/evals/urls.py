"""Every eval page, mounted under /p/<slug>/evals/ by one line in studio/urls.py: start,
progress and cancel (views/live.py), the result pages (views/results.py). `moved_patterns` holds
the redirects from the URLs before /p/<slug>/ (docs/studio.md)."""

from django.urls import path

from studio.evals.views import live, moved, results

urlpatterns = [
    path("new", live.eval_new, name="evals-new"),
    path("compare", results.eval_compare, name="evals-compare"),
    path("history", results.eval_history, name="evals-history"),
    path("<int:eval_id>/", live.eval_detail, name="evals-detail"),
    path("<int:eval_id>/cancel", live.eval_cancel, name="evals-cancel"),
    path("<int:eval_id>/summary", results.eval_summary, name="evals-summary"),
    path("<int:eval_id>/blame", results.eval_blame, name="evals-blame"),
    path("<int:eval_id>/coverage", results.eval_coverage, name="evals-coverage"),
    path("<int:eval_id>/tiers", results.eval_tiers, name="evals-tiers"),
    path("<int:eval_id>/cost", results.eval_cost, name="evals-cost"),
    path("<int:eval_id>/cases/<path:case_id>/<int:repeat>", results.eval_case, name="evals-case-trace"),
    path("<int:eval_id>/baseline", results.eval_mark_baseline, name="evals-mark-baseline"),
]

moved_patterns = [
    path("new", moved.eval_new_moved),
    path("compare", moved.eval_compare_moved),
    path("history/<slug:slug>", moved.eval_history_moved),
    path("<int:eval_id>/", moved.eval_moved),
    path("<int:eval_id>/<path:rest>", moved.eval_moved),
]
