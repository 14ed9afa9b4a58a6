"""The eval pages: start, progress and cancel (live.py), the result pages (summary.py,
blame.py, cost.py, compare.py over common.py),
and redirects from the URLs before /p/<slug>/ (moved.py)."""
