"""The project pages: the list, creation and overview, history, diff and download
(projects.py), the file editor (files.py), the evalset table and case form (evalset.py),
the Spec tab (spec.py);
common.py holds what every one of them needs."""

from studio.projects.views.projects import example_files, upload_limits

__all__ = ["example_files", "upload_limits"]
