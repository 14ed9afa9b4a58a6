"""Every eval page, mounted under /p/<slug>/evals/ by one line in studio/urls.py: start,
progress and cancel (views/live.py), the result pages (views/summary.py, blame.py, cost.py, compare.py,
cases.py: the per-case table, its export, the matrix, add to evalset). `moved_patterns` holds
the redirects from the URLs before /p/<slug>/ (docs/studio.md)."""

from django.urls import path

from studio.evals.views import blame, cases, compare, cost, live, moved, summary

urlpatterns = [
    path("new", live.eval_new, name="evals-new"),
    path("compare", compare.eval_compare, name="evals-compare"),
    path("history", compare.eval_history, name="evals-history"),
    path("matrix", cases.eval_matrix, name="evals-matrix"),
    path("add-case", cases.eval_add_case, name="evals-add-case"),
    path("<int:eval_id>/", live.eval_detail, name="evals-detail"),
    path("<int:eval_id>/cancel", live.eval_cancel, name="evals-cancel"),
    path("<int:eval_id>/summary", summary.eval_summary, name="evals-summary"),
    path("<int:eval_id>/blame", blame.eval_blame, name="evals-blame"),
    path("<int:eval_id>/coverage", blame.eval_coverage, name="evals-coverage"),
    path("<int:eval_id>/tiers", summary.eval_tiers, name="evals-tiers"),
    path("<int:eval_id>/cost", cost.eval_cost, name="evals-cost"),
    path("<int:eval_id>/cases", cases.eval_cases, name="evals-cases"),
    path("<int:eval_id>/export", cases.eval_export, name="evals-export"),
    path("<int:eval_id>/cases/<path:case_id>/<int:repeat>", cost.eval_case, name="evals-case-trace"),
    path("<int:eval_id>/baseline", summary.eval_mark_baseline, name="evals-mark-baseline"),
]

moved_patterns = [
    path("new", moved.eval_new_moved),
    path("compare", moved.eval_compare_moved),
    path("history/<slug:slug>", moved.eval_history_moved),
    path("<int:eval_id>/", moved.eval_moved),
    path("<int:eval_id>/<path:rest>", moved.eval_moved),
]
