from django.urls import path

from studio.projects import editor, evalset_views, views

urlpatterns = [
    path("", views.projects_list, name="projects-list"),
    path("new", views.project_create, name="projects-create"),
    path("p/<slug:slug>/", views.project_overview, name="projects-overview"),
    path("p/<slug:slug>/files/", editor.files_index, name="projects-files"),
    path("p/<slug:slug>/files/<path:path>", editor.file_edit, name="projects-file"),
    path("p/<slug:slug>/validate/<path:path>", editor.file_validate, name="projects-file-validate"),
    path("p/<slug:slug>/delete/<path:path>", editor.file_delete, name="projects-file-delete"),
    path("p/<slug:slug>/evalset/", evalset_views.evalset_table, name="projects-evalset"),
    path("p/<slug:slug>/evalset/new", evalset_views.evalset_case, name="projects-evalset-new"),
    path("p/<slug:slug>/evalset/<int:line>/", evalset_views.evalset_case, name="projects-evalset-case"),
    path("p/<slug:slug>/evalset/<int:line>/delete", evalset_views.evalset_delete, name="projects-evalset-delete"),
    path("p/<slug:slug>/history/", views.project_history, name="projects-history"),
    path("p/<slug:slug>/diff/", views.project_diff, name="projects-diff"),
    path("p/<slug:slug>/download/", views.project_download, name="projects-download"),
]
