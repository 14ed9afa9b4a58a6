from django.urls import path

from studio.projects.views import evalset, files, projects, spec

urlpatterns = [
    path("", projects.projects_list, name="projects-list"),
    path("new", projects.project_create, name="projects-create"),
    path("docs/pack-format", projects.pack_format_doc, name="projects-pack-format-doc"),
    path("p/<slug:slug>/", projects.project_overview, name="projects-overview"),
    path("p/<slug:slug>/files/", files.files_index, name="projects-files"),
    path("p/<slug:slug>/files/<path:path>", files.file_edit, name="projects-file"),
    path("p/<slug:slug>/validate/<path:path>", files.file_validate, name="projects-file-validate"),
    path("p/<slug:slug>/delete/<path:path>", files.file_delete, name="projects-file-delete"),
    path("p/<slug:slug>/evalset/", evalset.evalset_table, name="projects-evalset"),
    path("p/<slug:slug>/evalset/new", evalset.evalset_case, name="projects-evalset-new"),
    path("p/<slug:slug>/evalset/<int:line>/", evalset.evalset_case, name="projects-evalset-case"),
    path("p/<slug:slug>/evalset/<int:line>/delete", evalset.evalset_delete, name="projects-evalset-delete"),
    path("p/<slug:slug>/spec/", spec.spec_edit, name="projects-spec"),
    path("p/<slug:slug>/spec/gold/", spec.gold_edit, name="projects-spec-gold"),
    path("p/<slug:slug>/spec/validate", spec.spec_validate, name="projects-spec-validate"),
    path("p/<slug:slug>/spec/create", spec.spec_create, name="projects-spec-create"),
    path("p/<slug:slug>/history/", projects.project_history, name="projects-history"),
    path("p/<slug:slug>/diff/", projects.project_diff, name="projects-diff"),
    path("p/<slug:slug>/download/", projects.project_download, name="projects-download"),
]
