"""The eval pages: start, progress and cancel (live.py), the result pages (results.py),
and redirects from the URLs before /p/<slug>/ (moved.py)."""
