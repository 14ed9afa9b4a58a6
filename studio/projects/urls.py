from django.urls import path

from studio.projects import views

urlpatterns = [
    path("", views.projects_list, name="projects-list"),
    path("new", views.project_create, name="projects-create"),
    path("p/<slug:slug>/", views.project_overview, name="projects-overview"),
]
